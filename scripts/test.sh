#!/usr/bin/env bash
# The test command (`npm test`): prepares a fresh Debian machine as root, starts private
# services, runs lint, typecheck and every test, stops what it started and leaves nothing.
cd "$(dirname "$0")/.."
source scripts/lib.sh
trap services_cleanup EXIT

ensure_packages
[ -d node_modules ] || npm ci
log "build and typecheck"; npx tsc -p tsconfig.json
log "lint"; npx eslint .
npx prettier --check --log-level warn 'src/**/*.ts' 'test/**/*.ts' 'bench/**/*.ts'
node scripts/check-layout.mjs src
start_etcd

# Timing assertions (startup in time for Docker) run alone first, so that the parallel e2e files
# cannot starve them of CPU; then everything else, files in parallel.
serial="dist/test/plugin-api/lifecycle.test.js"
files=$(find dist/test -name '*.test.js' | grep -v -F "$serial" | sort)
[ "$#" -gt 0 ] && { serial=""; files="$*"; }
log "tests"
set +e
status=0
: >"$OVSNET_TMP/tap.out"
if [ -n "$serial" ]; then
  npx tap --disable-coverage --timeout 600 --reporter=tap --jobs=1 $serial | tee -a "$OVSNET_TMP/tap.out"
  status=${PIPESTATUS[0]}
fi
# shellcheck disable=SC2086
npx tap --disable-coverage --timeout 600 --reporter=tap $files | tee -a "$OVSNET_TMP/tap.out"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
set -e
# A plain closing line any CI reads: count the top-level test files' assertions.
pass=$(grep -cE '^\s*ok [0-9]+' "$OVSNET_TMP/tap.out" || true)
fail=$(grep -cE '^\s*not ok [0-9]+' "$OVSNET_TMP/tap.out" || true)
echo "tests: $pass passed, $fail failed"
[ "$pass" -gt 0 ] || { echo "no test ran" >&2; exit 1; }
exit "$status"
