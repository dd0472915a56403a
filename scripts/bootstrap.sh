#!/usr/bin/env bash
# Makes a fresh clone runnable: npm packages (when missing or stale), the TypeScript build, and the local
# Temporal binaries. `npm start` and `npm test` run it first, so both work on a fresh machine as they are.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json ]]; then
  echo "bootstrap: installing npm packages (npm ci)" >&2
  npm ci --no-audit --no-fund >&2
fi
rm -rf dist  # no stale compiled tests from deleted sources
node_modules/.bin/tsc -p tsconfig.json
bash scripts/setup-temporal.sh
