#!/usr/bin/env bash
# Builds a real S3-compatible server into .s3/ (git-ignored) for the tests and `npm run fleet:demo`:
#   versitygw (Versity S3 Gateway, Apache-2.0) -> .s3/bin/versitygw
# It serves a local folder over the S3 API (multipart uploads, checksums, conditional writes), on loopback.
# Built from the Go module proxy with the machine's Go toolchain (about 3 minutes on 2 cores, once).
# Idempotent: a second run with the binary present and the pinned version recorded returns at once.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$root/.s3"
module="github.com/versity/versitygw/cmd/versitygw"
version="v1.8.0"
want="$module@$version"
stamp="$dir/installed"

if [[ -x "$dir/bin/versitygw" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "setup-s3: go not found; install Go 1.24 or later (it builds the S3 test server from the Go module proxy)" >&2
  exit 1
fi
mkdir -p "$dir/bin"
echo "setup-s3: building $want into $dir/bin (a few minutes, once)" >&2
start=$SECONDS
# -modcacherw: the module cache stays removable by the user who built it.
GOBIN="$dir/bin" GOFLAGS="-modcacherw" go install "$want"
"$dir/bin/versitygw" --version >/dev/null
echo "setup-s3: built in $((SECONDS - start)) s" >&2
echo "$want" > "$stamp"
