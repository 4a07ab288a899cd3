# pingd container image: build the TypeScript in one stage, run the compiled JavaScript with production
# dependencies only in a small one, as the unprivileged `node` user. See docs/guides/deployment.md.

# Node LTS on Alpine (musl): every dependency is plain JavaScript or WebAssembly (PGlite), nothing native.
ARG NODE_IMAGE=node:24-alpine

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: `prepare` (tsc) needs the sources, which are copied after this cached layer.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

FROM ${NODE_IMAGE}
# MALLOC_ARENA_MAX: glibc gives each thread that allocates (brotli in libuv's pool, the embedded database's
# thread) an arena of its own that it keeps: after 10 minutes at 200 pings/s nine such arenas held 185 MB of
# the embedded process; with two, the second held 58 MB (docs/performance.md, "Scaling"). MALLOC_MMAP_THRESHOLD_: blocks of
# 128 KiB and more (compressed chunks on their way to the database) are mapped and unmapped one by one, where
# glibc otherwise raises that threshold as such blocks are freed and keeps them in its heaps (soak at 200
# pings/s on the embedded database: 324 -> 302 MB peak, 266-292 MB sampled). musl (the alpine images) has no
# arenas and ignores both; they take effect on a glibc base (--build-arg NODE_IMAGE=node:24-bookworm-slim)
# and with `npm start`.
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    DATA_DIR=/data \
    MALLOC_ARENA_MAX=2 \
    MALLOC_MMAP_THRESHOLD_=131072
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY bin ./bin
COPY migrations ./migrations
# The pages' templates and static files are read from beside the code at start.
COPY src/web/views ./src/web/views
COPY src/web/assets ./src/web/assets
# The embedded database (used when DATABASE_URL is unset) lives here; mount a volume on it.
RUN mkdir -p /data && chown node:node /data
USER node
EXPOSE 8080
# Readiness, not mere liveness: the database answers and the schema is current.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# Exec form: node is PID 1 and receives SIGTERM itself (no shell in between to swallow it); pingd
# handles SIGTERM/SIGINT with a graceful shutdown.
CMD ["node", "bin/pingd.js", "serve"]
