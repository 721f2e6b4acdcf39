// V8's memory-pressure notice for src/memory-trim.ts. After a burst, the event loop's heap can hold tens of
// MB of garbage that no collection comes for: V8 collects as allocation goes on, and an idle relay
// allocates nothing, so its heap (and the RSS) stays where the burst left it (seen: 1 run in ~5 of
// bench's two rounds of 1,000 streams kept 70-170 MB above idle 30 s later; a full collection then gave
// it back). V8 lets an embedder say "memory is short": at the moderate level it starts an incremental
// collection that also shrinks the heap, run in small steps on the event loop. Node-API has no such call,
// hence this file in C++ against V8's own header (the addon is built for the Node that runs it).
#include <v8.h>

extern "C" int relay_memory_pressure(void) {
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  if (isolate == nullptr) return 0;
  isolate->MemoryPressureNotification(v8::MemoryPressureLevel::kModerate);
  return 1;
}

// The same, at once: V8 collects all it can (full collections until one frees nothing more) and shrinks the
// heap before it returns, on the calling thread (~100 ms for the ~55 MB heap 1,000 streams leave). For a
// moment known to be quiet: report-service.ts calls it when a burst is over, before the report worker starts.
extern "C" int relay_low_memory(void) {
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  if (isolate == nullptr) return 0;
  isolate->LowMemoryNotification();
  return 1;
}
