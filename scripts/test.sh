#!/usr/bin/env bash
# The test files `npm test` runs (after its setup): every compiled test file, dist/test/**/*.test.js, two
# files at a time. Extra arguments go to `node --test` before the files (e.g. --test-name-pattern=breaker).
#   TILEBREAKER_LIST_TESTS=1 bash scripts/test.sh   # print the files, one a line, and run nothing
# Only *.test.js: given the folder dist/test/, Node 20's runner also loads every helper module under it
# (test/helpers, test/scenarios, ...: any .js under a folder named test matches its default patterns) as a
# test file with no tests. Node 20 takes no glob patterns (`node --test "dist/test/**/*.test.js"` says it
# cannot find that file; globs came in Node 21), so bash expands the pattern: the same list on Node 20 and 24.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
shopt -s globstar nullglob
files=(dist/test/**/*.test.js)
((${#files[@]})) || { echo "test: no dist/test/**/*.test.js (build first: npm run build)" >&2; exit 1; }
if [[ -n "${TILEBREAKER_LIST_TESTS:-}" ]]; then
  printf '%s\n' "${files[@]}"
  exit 0
fi
# Workers of this build (in-process and the worker processes tests start) bundle the workflow code once and
# share the bundle (src/client/worker.ts, TILEBREAKER_WORKFLOW_CACHE), instead of a webpack run for each.
export TILEBREAKER_WORKFLOW_CACHE="${TILEBREAKER_WORKFLOW_CACHE:-$PWD/.build-workflows}"
# Two files at a time (TILEBREAKER_TEST_JOBS): most of a file's time is spent waiting on servers, timers
# and child processes, and every test waits for the state it checks, so it passes beside another file as it
# does beside a CPU hog. Each file still runs its own tests one after another.
jobs="${TILEBREAKER_TEST_JOBS:-2}"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "test: TILEBREAKER_TEST_JOBS must be a whole number >= 1 (got \"$jobs\")" >&2; exit 2; }
exec node --test --test-concurrency="$jobs" "$@" "${files[@]}"
