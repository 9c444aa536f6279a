# shardcron image: one binary, every role (scheduler, worker, console), configured only by SHARDCRON_*
# environment variables (docs/configuration.md). See docs/deployment.md.
#
#   docker build -t shardcron:local .
#   docker run --init --rm -e SHARDCRON_ZK=zk:2181 -e SHARDCRON_REDIS_URL=redis://redis:6379 shardcron:local ping
#
# No BuildKit-only syntax (cache mounts, heredocs), so the classic builder and docker-compose v1 build it too.

ARG NODE_IMAGE=node:20-bookworm-slim

# ---------------------------------------------------------------------------------------------------
# build: install from the pinned lock, compile src/ (dist/) and the example jobs, then drop dev packages.
FROM ${NODE_IMAGE} AS build

# The npm of the developers' machines and of CI: npm 11 reads package.json's "allowScripts" (the install
# scripts shardcron's dependencies may run: none, see README.md "Install scripts"); Node 20's npm 10 would
# run them all.
ARG NPM_VERSION=11.19.1
ENV npm_config_update_notifier=false \
    npm_config_fund=false \
    npm_config_audit=false
RUN npm install --global "npm@${NPM_VERSION}" && npm --version

WORKDIR /app
COPY package.json package-lock.json ./
# The lock lists every platform's optional binaries, so `npm ci` installs exactly the pinned tree here too,
# as in a fresh clone and in CI.
RUN npm ci

COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY bin ./bin
COPY examples ./examples

# The library: src/ -> dist/ (package.json "main" and bin/shardcron.js use dist/).
RUN npm run build

# The example jobs, compiled to plain JavaScript so the runtime needs neither tsx nor TypeScript.
# tsconfig.json covers examples/ for type checking; this config only adds where to emit. Imports of the
# library (`../src` or `shardcron`) are compiled as they are and resolve to dist/ at run time (see the
# symlinks in the runtime stage), so the jobs module and the CLI share one copy of shardcron.
RUN set -eu; \
    ln -s .. node_modules/shardcron; \
    printf '%s\n' \
      '{' \
      '  "extends": "./tsconfig.json",' \
      '  "compilerOptions": { "rootDir": ".", "outDir": "/tmp/examples-build", "types": ["node"], "declaration": false, "sourceMap": false },' \
      '  "include": ["examples"]' \
      '}' > tsconfig.examples.json; \
    npx tsc -p tsconfig.examples.json; \
    mkdir -p /app/examples-dist; \
    cp -R /tmp/examples-build/examples/. /app/examples-dist/; \
    test -n "$(find /app/examples-dist -name '*.js')"; \
    rm -rf /tmp/examples-build tsconfig.examples.json node_modules/shardcron

# Production dependencies only, from the same tree.
RUN npm prune --omit=dev && npm cache clean --force

# ---------------------------------------------------------------------------------------------------
# runtime: node, the compiled code and production packages; no compiler, no sources, no root.
FROM ${NODE_IMAGE} AS runtime

ARG NODE_IMAGE
ARG VERSION=0.1.0
ARG REVISION=
ARG CREATED=
ARG SOURCE=
LABEL org.opencontainers.image.title="shardcron" \
      org.opencontainers.image.description="Sharded, fault-tolerant cron jobs across a pool of Node.js workers: ZooKeeper coordination, BullMQ execution." \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.base.name="${NODE_IMAGE}"

# NODE_PATH lets a jobs module copied or mounted outside /app `require('shardcron')` and this image's packages.
# MALLOC_ARENA_MAX: glibc gives every thread that frees memory an arena of its own, and V8 frees
# buffers on its background threads; two arenas took a 10,000-job leader's RSS outside the V8 heap
# from 80-180 MB to about 100 MB (docs/design-notes.md, "Leader memory").
ENV NODE_ENV=production \
    NODE_PATH=/app/node_modules \
    MALLOC_ARENA_MAX=2

WORKDIR /app
# Owned by root and not writable by the runtime user: the process cannot change its own code.
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/bin ./bin
COPY --from=build /app/dist ./dist
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/examples-dist ./examples

# One copy of the library for the CLI and for jobs modules: `require('shardcron')` and the examples'
# `require('../src')` both land on /app/dist (Node caches modules by real path, so it is the same module
# instance, which defineJob's results are checked against). `shardcron` on PATH for `docker exec`.
RUN set -eu; \
    ln -s .. node_modules/shardcron; \
    ln -s dist src; \
    printf '#!/bin/sh\nexec node /app/bin/shardcron.js "$@"\n' > /usr/local/bin/shardcron; \
    chmod 0755 /usr/local/bin/shardcron; \
    node -e "require('/app/dist/index.js')"

# The node image's unprivileged user (uid 1000).
USER node

# The console role's port (SHARDCRON_OPS_PORT); the other roles listen on nothing.
EXPOSE 8080

# ZooKeeper and Redis answer (`shardcron ping` probes both, each within SHARDCRON_ZK_CONNECT_TIMEOUT_MS,
# 15 s by default: the timeout leaves room for it so the reason shows in `docker inspect`).
HEALTHCHECK --interval=30s --timeout=20s --start-period=30s --retries=3 \
  CMD ["node", "/app/bin/shardcron.js", "ping"]

# Node as PID 1 does not reap children (script jobs spawn some): run with `docker run --init`
# (compose: `init: true`). SIGTERM drains the node: SHARDCRON_SHUTDOWN_GRACE_MS, 30 s by default.
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "/app/bin/shardcron.js"]
CMD ["start"]
