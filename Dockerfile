# syntax=docker/dockerfile:1
#
# tilebreaker worker image (the same CLI runs any other command).
#   docker build -t tilebreaker .
#   docker run --rm -e TEMPORAL_ADDRESS=temporal.example:7233 tilebreaker          # runs `worker`
#   docker run --rm -e TEMPORAL_ADDRESS=... tilebreaker <other subcommand> ...     # same CLI, other command
# docker-compose.yml builds this image for its `worker` and `cli` services.
#
# Node.js 24 LTS, pinned to a release so that a rebuild gets the same runtime; raise it with the patch
# releases (`--build-arg NODE_IMAGE=...`). package.json's engines keep >=20.18.1 for library users.

ARG NODE_IMAGE=node:24.22.3-bookworm-slim

# ---- build: all dependencies, tsc over src/ only -> dist/src ------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app

# Dependencies first, so the layer is reused while only sources change.
# --ignore-scripts: the package's own `prepare` script runs tsc, and the sources are not here yet.
# Nothing the build needs has an install script (typescript has none).
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund

# Only what the runtime runs: tests, benchmarks and scripts stay out of the image (tsconfig's other
# include patterns then match nothing, which tsc accepts).
COPY tsconfig.json ./
COPY src ./src
RUN node_modules/.bin/tsc -p tsconfig.json && test -f dist/src/cli/main.js && test ! -e dist/test

# ---- runtime: production dependencies and dist/src only ----------------------------------------
FROM ${NODE_IMAGE} AS runtime
WORKDIR /app

# --omit=dev: no typescript / fast-check / @types in the image.
# --ignore-scripts: skips the package's `prepare` (tsc, not installed here; dist/ comes from the build stage).
#   Native parts need no install scripts: sharp 0.35 has no install script and takes its prebuilt libvips
#   binaries from the optional dependencies @img/sharp-linux-<arch>; @swc/core (used by @temporalio/worker
#   to bundle workflow code) takes its binary from @swc/core-linux-<arch>-gnu, and its postinstall only
#   checks for it; @temporalio/core-bridge ships prebuilt releases/ for x86_64 and aarch64 linux-gnu. All
#   three are Node-API modules, so the same binaries load on Node 20 and 24 (scripts/node24.sh checks).
#   better-sqlite3 (the seed's MBTiles writer) is not: its binding is built for this Node by its own install
#   script, run alone here (prebuild-install fetches the release's binary for Node 24, linux-gnu).
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm rebuild better-sqlite3 \
 && npm cache clean --force

COPY --from=build /app/dist/src ./dist/src

# Mosaic output on a local disk, and the stitch's scratch folder for outputs bound for a bucket. Created here
# and owned by the unprivileged user, so that empty named volumes mounted there start out writable by that
# user. /config holds sources and request files (TILEBREAKER_SOURCES_DIR=/config), mounted read-only; the
# worker only reads there. The defaults make a bare `docker run` confined the same way as the compose stack.
RUN mkdir -p /data /scratch /config && chown node:node /data /scratch
ENV TILEBREAKER_OUTPUT_DIR=/data \
    TILEBREAKER_SOURCES_DIR=/config \
    TILEBREAKER_SCRATCH_DIR=/scratch

# The official node images carry an unprivileged `node` user (uid 1000). Application files stay root-owned
# and read-only to it.
USER node

ENTRYPOINT ["node", "dist/src/cli/main.js"]
CMD ["worker"]
