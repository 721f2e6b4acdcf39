# syntax=docker/dockerfile:1
# llm-relay image: Node 24 LTS, production dependencies only, runs as the unprivileged `node` user.

FROM node:24-bookworm-slim AS build
WORKDIR /app
# The compiler is for native/ (malloc_trim, V8's memory-pressure notice, the cache's raw DEFLATE). SQLite needs
# none here: on Node 24 the relay runs better-sqlite3 13, shipped prebuilt on Node-API (`better-sqlite3-napi`),
# and never loads 12, which is left unbuilt (built against Node 24 it aborts the process now and then:
# src/storage/sqlite-driver.ts).
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ \
    && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
# Without scripts: the project's own (prepare builds dist/, and src/ is not here yet) and better-sqlite3 12's
# build (see above); the project's addon is built next.
RUN npm ci --ignore-scripts
COPY native/binding.gyp native/malloc-trim.c native/memory-pressure.cc native/raw-deflate.c ./native/
RUN npm run build:native
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# (tsc's incremental record, dist/.tsbuildinfo, is of no use in the image)
RUN npm run build && rm -f dist/.tsbuildinfo && npm prune --omit=dev

FROM node:24-bookworm-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8787 \
    RELAY_DATA_DIR=/data
# glibc keeps what a burst freed (a thousand streams at once) unless told otherwise: after freeing one large
# buffer it raises its trim and mmap thresholds to that size and keeps up to twice it at the top of every
# heap, and each thread that ever allocated has an arena of its own. Two arenas and fixed thresholds (they
# can only be set before the process starts): measured at rest after two rounds of 1,000 streams, 157-178 MB
# -> 128 MB (README, Docker). The relay also calls malloc_trim in quiet moments (src/memory-trim.ts).
ENV MALLOC_ARENA_MAX=2 \
    MALLOC_TRIM_THRESHOLD_=131072 \
    MALLOC_MMAP_THRESHOLD_=131072
WORKDIR /app
COPY --from=build --chown=node:node /app/package.json ./
COPY --from=build --chown=node:node /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/dist ./dist
COPY --from=build --chown=node:node /app/native/build/Release/malloc_trim.node /app/native/build/Release/raw_deflate.node ./native/build/Release/
COPY --chown=node:node config ./config
COPY --chown=node:node dashboard ./dashboard
# 0700: the relay keeps prompts and answers there (it makes a data dir of its own 0700 too).
RUN mkdir -p /data && chown node:node /data && chmod 700 /data
USER node
VOLUME ["/data"]
EXPOSE 8787
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8787)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# SIGTERM from `docker stop` drains in-flight calls and flushes reports (RELAY_SHUTDOWN_GRACE_MS).
STOPSIGNAL SIGTERM
# V8's semi-spaces capped as the relay caps them on Node 24 when it starts itself again (src/memory-trim.ts,
# semiSpaceMb; the MALLOC_* settings above make that restart unneeded here): Node 24 would size them up to 64 MB
# each. The relay takes the flag back before its report worker starts, which keeps its own 8 MB young generation.
CMD ["node", "--max-semi-space-size=16", "dist/cli.js"]
