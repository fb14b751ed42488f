#!/usr/bin/env bash
# Installs ovsnet's CNI plugin (docs/cni.md): the runtime executes DIR/ovsnet, which runs the
# thin client (dist/src/cni/client.js) with Node; the client forwards each command to the ovsnet
# daemon's CNI socket.
#
#   cni-install.sh [DIR]          DIR/ovsnet (default /opt/cni/bin) runs this checkout's build
#   cni-install.sh --bundle DIR   a self-contained copy: DIR/ovsnet and DIR/ovsnet.d/ (the client),
#                                 for the managed plugin's directory; copy both to /opt/cni/bin
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f dist/src/cni/client.js ] || npx tsc -p tsconfig.json
if [ "${1:-}" = --bundle ]; then
  dir=$(realpath -m "${2:?usage: cni-install.sh --bundle DIR}")
  install -d "$dir/ovsnet.d"
  install -m 0644 dist/src/cni/client.js dist/src/cni/protocol.js "$dir/ovsnet.d/"
  printf '{ "type": "module" }\n' >"$dir/ovsnet.d/package.json"
  target='"$(dirname "$(readlink -f "$0")")/ovsnet.d/client.js"'
  node=node
else
  dir=$(realpath -m "${1:-/opt/cni/bin}")
  install -d "$dir"
  target=$(realpath dist/src/cni/client.js)
  node=$(command -v node)
fi
tmp=$(mktemp "$dir/.ovsnet.XXXXXX")
printf '#!/bin/sh\n# ovsnet CNI plugin: forwards each CNI command to the ovsnet daemon (docs/cni.md).\nexec %s %s "$@"\n' "$node" "$target" >"$tmp"
chmod 0755 "$tmp"
mv -f "$tmp" "$dir/ovsnet" # atomic: a runtime never runs a half-written plugin
echo "CNI plugin installed: $dir/ovsnet"
