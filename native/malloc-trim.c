// malloc_trim(0) for Node: glibc keeps the pages a burst freed inside its arenas (fragmented below each
// arena's top, where free() never trims) until a process asks for them to be given back, and JavaScript
// has no way to ask. src/memory-trim.ts calls this in a quiet moment after RSS grew. A no-op (false)
// where the C library is not glibc: musl, macOS and Windows allocators have no such call. `reduce` asks
// V8 to collect and shrink the calling thread's heap (memory-pressure.cc).
#include <node_api.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

static napi_value Trim(napi_env env, napi_callback_info info) {
  (void)info;
  int released = 0;
#if defined(__GLIBC__)
  released = malloc_trim(0);
#endif
  napi_value result;
  napi_get_boolean(env, released != 0, &result);
  return result;
}

int relay_memory_pressure(void);

static napi_value Reduce(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value result;
  napi_get_boolean(env, relay_memory_pressure() != 0, &result);
  return result;
}

static napi_value Supported(napi_env env) {
  napi_value result;
#if defined(__GLIBC__)
  napi_get_boolean(env, true, &result);
#else
  napi_get_boolean(env, false, &result);
#endif
  return result;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "trim", NAPI_AUTO_LENGTH, Trim, NULL, &fn);
  napi_set_named_property(env, exports, "trim", fn);
  napi_create_function(env, "reduce", NAPI_AUTO_LENGTH, Reduce, NULL, &fn);
  napi_set_named_property(env, exports, "reduce", fn);
  napi_set_named_property(env, exports, "supported", Supported(env));
  return exports;
}
