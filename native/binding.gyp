{
  "targets": [
    {
      "target_name": "malloc_trim",
      "sources": ["malloc-trim.c"],
      "defines": ["NAPI_VERSION=8"]
    }
  ]
}
