{
  "targets": [
    {
      "target_name": "malloc_trim",
      "sources": ["malloc-trim.c", "memory-pressure.cc"],
      "defines": ["NAPI_VERSION=8"]
    },
    {
      "target_name": "raw_deflate",
      "sources": ["raw-deflate.c"],
      "defines": ["NAPI_VERSION=8"]
    }
  ]
}
