# syntax=docker/dockerfile:1
#
# tilebreaker worker image.
#   docker build -t tilebreaker .
#   docker run --rm -e TEMPORAL_ADDRESS=temporal.example:7233 tilebreaker          # runs `worker`
#   docker run --rm -e TEMPORAL_ADDRESS=... tilebreaker <other subcommand> ...     # same CLI, other command
# docker-compose.yml builds this image for its `worker` service.

ARG NODE_IMAGE=node:20-bookworm-slim

# ---- build: all dependencies, tsc -> dist/ ----------------------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app

# Dependencies first, so the layer is reused while only sources change.
# --ignore-scripts: the package's own `prepare` script runs tsc, and the sources are not here yet.
# Nothing the build needs has an install script (typescript has none).
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund

# Sources (see .dockerignore), then the same build as on a workstation.
COPY . .
RUN npm run build

# ---- runtime: production dependencies and dist/ only -------------------------------------------
FROM ${NODE_IMAGE} AS runtime
WORKDIR /app

# --omit=dev: no typescript / fast-check / @types in the image.
# --ignore-scripts: skips the package's `prepare` (tsc, not installed here; dist/ comes from the build stage).
#   Native parts need no install scripts: sharp 0.35 has no install script and takes its prebuilt libvips
#   binaries from the optional dependencies @img/sharp-linux-<arch>; @swc/core (used by @temporalio/worker
#   to bundle workflow code) takes its binary from @swc/core-linux-<arch>-gnu, and its postinstall only
#   checks for it; @temporalio/core-bridge ships prebuilt releases/ for x86_64 and aarch64 linux-gnu.
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force

COPY --from=build /app/dist ./dist

# Mosaic output. Created here and owned by the unprivileged user, so that an empty named volume mounted
# on /data (docker-compose.yml: TILEBREAKER_OUTPUT_DIR=/data) starts out writable by that user. /config holds
# sources files (TILEBREAKER_SOURCES_DIR=/config), mounted read-only; the worker only reads there. The
# defaults make a bare `docker run` confined the same way as the compose stack.
RUN mkdir -p /data /config && chown node:node /data
ENV TILEBREAKER_OUTPUT_DIR=/data TILEBREAKER_SOURCES_DIR=/config

# The official node images carry an unprivileged `node` user (uid 1000). Application files stay root-owned
# and read-only to it.
USER node

ENTRYPOINT ["node", "dist/src/cli/main.js"]
CMD ["worker"]
