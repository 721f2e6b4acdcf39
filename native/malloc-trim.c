// malloc_trim(0) for Node: glibc keeps the pages a burst freed inside its arenas (fragmented below each
// arena's top, where free() never trims) until a process asks for them to be given back, and JavaScript
// has no way to ask. src/memory-trim.ts calls this in a quiet moment after RSS grew. A no-op (false)
// where the C library is not glibc: musl, macOS and Windows allocators have no such call. `reduce` asks
// V8 to collect and shrink the calling thread's heap in steps, `collect` at once (memory-pressure.cc).
#include <node_api.h>
#include <errno.h>
#include <stdlib.h>
#if defined(__GLIBC__)
#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>
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

int relay_low_memory(void);

static napi_value Collect(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value result;
  napi_get_boolean(env, relay_low_memory() != 0, &result);
  return result;
}

// mallopt(M_ARENA_MAX, n): threads that have no arena yet share at most n (the main thread's included),
// instead of glibc's default of 8 per core. Each arena's free top stays resident after a burst (malloc_trim
// gives back free pages inside an arena, but another thread's arena top only when that thread frees into it
// past the trim threshold), so fewer arenas leave less behind. False where it was not set (not glibc, or a
// bad n).
static napi_value LimitArenas(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t n = 0;
  int done = 0;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc >= 1 && napi_get_value_int32(env, argv[0], &n) == napi_ok && n > 0) {
#if defined(__GLIBC__)
    done = mallopt(M_ARENA_MAX, n);
#endif
  }
  napi_value result;
  napi_get_boolean(env, done != 0, &result);
  return result;
}

// execv(path, argv) with the current environment: the process starts again as the same process (its pid,
// its parent, stdin/stdout/stderr; other descriptors Node opens close-on-exec), for glibc to read settings it reads only
// at start (MALLOC_ARENA_MAX). Returns only when it failed: errno (ENOSYS where it is not built).
static napi_value Exec(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  int err = ENOSYS;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
#if defined(__GLIBC__)
  uint32_t n = 0;
  size_t len = 0;
  char path[4096];
  if (argc < 2 || napi_get_value_string_utf8(env, argv[0], path, sizeof path, &len) != napi_ok || len >= sizeof path - 1 ||
      napi_get_array_length(env, argv[1], &n) != napi_ok || n == 0) {
    err = EINVAL;
  } else {
    char **args = calloc(n + 1, sizeof(char *));
    err = args ? 0 : ENOMEM;
    for (uint32_t i = 0; i < n && err == 0; i++) {
      napi_value item;
      size_t size = 0;
      if (napi_get_element(env, argv[1], i, &item) != napi_ok || napi_get_value_string_utf8(env, item, NULL, 0, &size) != napi_ok) {
        err = EINVAL;
        break;
      }
      args[i] = malloc(size + 1);
      if (!args[i]) err = ENOMEM;
      else napi_get_value_string_utf8(env, item, args[i], size + 1, &size);
    }
    if (err == 0) {
      // Node marks stdin, stdout and stderr close-on-exec as it starts: the next image must keep them.
      int flags[3];
      for (int fd = 0; fd < 3; fd++) {
        flags[fd] = fcntl(fd, F_GETFD);
        if (flags[fd] >= 0) fcntl(fd, F_SETFD, flags[fd] & ~FD_CLOEXEC);
      }
      execv(path, args);
      err = errno;
      for (int fd = 0; fd < 3; fd++)
        if (flags[fd] >= 0) fcntl(fd, F_SETFD, flags[fd]);
    }
    for (uint32_t i = 0; args && i < n; i++) free(args[i]);
    free(args);
  }
#endif
  napi_value result;
  napi_create_int32(env, err, &result);
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
  napi_create_function(env, "collect", NAPI_AUTO_LENGTH, Collect, NULL, &fn);
  napi_set_named_property(env, exports, "collect", fn);
  napi_create_function(env, "exec", NAPI_AUTO_LENGTH, Exec, NULL, &fn);
  napi_set_named_property(env, exports, "exec", fn);
  napi_create_function(env, "limitArenas", NAPI_AUTO_LENGTH, LimitArenas, NULL, &fn);
  napi_set_named_property(env, exports, "limitArenas", fn);
  napi_set_named_property(env, exports, "supported", Supported(env));
  return exports;
}
