#!/usr/bin/env bash
# `npm start`: installs dependencies if missing, builds, and runs the plugin in the foreground.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d node_modules ] || npm ci
npx tsc -p tsconfig.json
exec node dist/src/main.js serve
