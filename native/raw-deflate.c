// Raw DEFLATE for the SQLite cache's values (on the event loop) and the body store's blobs (on the report
// worker), with one zlib stream kept per thread and reset between values. Node's zlib.deflateRawSync builds a
// stream object and a zlib state for every call and tears both down after: ~40 µs for a 1 KB answer on this
// project's machine, most of it before the first byte is compressed. Here a value costs the compression
// itself (src/storage/raw-deflate.ts has the numbers). The bytes are standard raw DEFLATE (zlib's own code:
// Node exports the zlib it is built with), so values written by either path read with either.
#include <node_api.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

// The largest value inflated: far above any cache entry (the relay bounds entries long before this).
#define MAX_INFLATED ((size_t)1 << 30)

typedef struct {
  z_stream deflate;
  int deflate_ready;
  z_stream inflate;
  int inflate_ready;
  unsigned char* scratch;
  size_t scratch_size;
} Streams;

static void Finalize(napi_env env, void* data, void* hint) {
  Streams* s = (Streams*)data;
  if (s->deflate_ready) deflateEnd(&s->deflate);
  if (s->inflate_ready) inflateEnd(&s->inflate);
  free(s->scratch);
  free(s);
}

// One set per environment (the event loop and each worker thread): never shared between threads.
static Streams* StreamsOf(napi_env env) {
  Streams* s = NULL;
  if (napi_get_instance_data(env, (void**)&s) == napi_ok && s != NULL) return s;
  s = (Streams*)calloc(1, sizeof(Streams));
  if (s == NULL || napi_set_instance_data(env, s, Finalize, NULL) != napi_ok) {
    free(s);
    return NULL;
  }
  return s;
}

static int Room(Streams* s, size_t size) {
  if (s->scratch_size >= size) return 1;
  unsigned char* bigger = (unsigned char*)realloc(s->scratch, size);
  if (bigger == NULL) return 0;
  s->scratch = bigger;
  s->scratch_size = size;
  return 1;
}

static int BufferArg(napi_env env, napi_callback_info info, void** data, size_t* length) {
  size_t argc = 1;
  napi_value argv[1];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
      napi_get_buffer_info(env, argv[0], data, length) != napi_ok) {
    napi_throw_type_error(env, NULL, "expected a Buffer");
    return 0;
  }
  return 1;
}

// The scratch space a value needed stays for the next one, unless it grew past this: one large value (a
// long answer) must not pin its size in the thread's heap for good.
#define KEEP_SCRATCH ((size_t)1 << 20)

static napi_value Result(napi_env env, Streams* s, size_t length) {
  napi_value result;
  void* copy;
  napi_status status = napi_create_buffer_copy(env, length, s->scratch, &copy, &result);
  if (s->scratch_size > KEEP_SCRATCH) {
    free(s->scratch);
    s->scratch = NULL;
    s->scratch_size = 0;
  }
  return status == napi_ok ? result : NULL;
}

// The call's Buffer and this thread's streams; NULL, with an exception pending, when either is missing.
static Streams* Begin(napi_env env, napi_callback_info info, void** data, size_t* length) {
  if (!BufferArg(env, info, data, length)) return NULL;
  if (*length > 0xffffffffu) {
    napi_throw_error(env, NULL, "raw-deflate: value too large");
    return NULL;
  }
  Streams* s = StreamsOf(env);
  if (s == NULL) napi_throw_error(env, NULL, "raw-deflate: out of memory");
  return s;
}

// A stream made ready for the next value: set up the first time, reset after. False, with an exception
// pending, when zlib refused.
static int Ready(napi_env env, int* ready, int rc_init_or_reset, const char* step) {
  if (rc_init_or_reset != Z_OK) {
    napi_throw_error(env, NULL, step);
    return 0;
  }
  *ready = 1;
  return 1;
}

// deflateRaw(buffer) -> Buffer: level 1, a 32 KB window, zlib's small hash table (memLevel 4).
static napi_value Deflate(napi_env env, napi_callback_info info) {
  void* data;
  size_t length;
  Streams* s = Begin(env, info, &data, &length);
  if (s == NULL) return NULL;
  int rc = s->deflate_ready ? deflateReset(&s->deflate) : deflateInit2(&s->deflate, 1, Z_DEFLATED, -15, 4, Z_DEFAULT_STRATEGY);
  if (!Ready(env, &s->deflate_ready, rc, "raw-deflate: zlib refused to set up a deflate stream")) return NULL;
  size_t bound = deflateBound(&s->deflate, (uLong)length);
  if (!Room(s, bound)) {
    napi_throw_error(env, NULL, "raw-deflate: out of memory");
    return NULL;
  }
  s->deflate.next_in = (Bytef*)data;
  s->deflate.avail_in = (uInt)length;
  s->deflate.next_out = s->scratch;
  s->deflate.avail_out = (uInt)bound;
  if (deflate(&s->deflate, Z_FINISH) != Z_STREAM_END) {
    napi_throw_error(env, NULL, "raw-deflate: deflate did not finish");
    return NULL;
  }
  return Result(env, s, bound - s->deflate.avail_out);
}

// inflateRaw(buffer) -> Buffer; throws on bytes that are not one whole raw DEFLATE stream.
static napi_value Inflate(napi_env env, napi_callback_info info) {
  void* data;
  size_t length;
  Streams* s = Begin(env, info, &data, &length);
  if (s == NULL) return NULL;
  int rc = s->inflate_ready ? inflateReset(&s->inflate) : inflateInit2(&s->inflate, -15);
  if (!Ready(env, &s->inflate_ready, rc, "raw-deflate: zlib refused to set up an inflate stream")) return NULL;
  size_t size = length * 4 + 256;
  if (!Room(s, size)) {
    napi_throw_error(env, NULL, "raw-deflate: out of memory");
    return NULL;
  }
  s->inflate.next_in = (Bytef*)data;
  s->inflate.avail_in = (uInt)length;
  size_t produced = 0;
  for (;;) {
    s->inflate.next_out = s->scratch + produced;
    s->inflate.avail_out = (uInt)(s->scratch_size - produced);
    int status = inflate(&s->inflate, Z_NO_FLUSH);
    produced = s->scratch_size - s->inflate.avail_out;
    if (status == Z_STREAM_END) break;
    if (status == Z_OK || status == Z_BUF_ERROR) {
      if (s->inflate.avail_out > 0) {
        // room left and nothing more to read: the stream was cut short
        napi_throw_error(env, "Z_BUF_ERROR", "unexpected end of file");
        return NULL;
      }
      if (s->scratch_size * 2 > MAX_INFLATED || !Room(s, s->scratch_size * 2)) {
        napi_throw_error(env, NULL, "raw-deflate: inflated value too large");
        return NULL;
      }
      continue;
    }
    napi_throw_error(env, "Z_DATA_ERROR", s->inflate.msg != NULL ? s->inflate.msg : "invalid deflate data");
    return NULL;
  }
  return Result(env, s, produced);
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"deflateRaw", NULL, Deflate, NULL, NULL, NULL, napi_default, NULL},
      {"inflateRaw", NULL, Inflate, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
