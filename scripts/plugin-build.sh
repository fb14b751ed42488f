#!/usr/bin/env bash
# `npm run plugin:build [-- DIR]`: the managed plugin's directory, with no container registry:
# DIR/config.json (plugin/config.json) and DIR/rootfs holding this machine's Node runtime, the
# built app, its production dependencies, iptables (both flavours) and ovs-ofctl with the libraries
# each needs. Then: docker plugin create ovsnet DIR && docker plugin enable ovsnet
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-build/plugin}")
[ -d node_modules ] || npm ci
npx tsc -p tsconfig.json
rm -rf "$out"
R="$out/rootfs"
# Mount points of plugin/config.json's mounts: ovsnet's state directory (read-write) and its
# secrets (read-only). Nothing else of the host's /var/lib (/var/lib/docker) or /etc is visible.
mkdir -p "$R"/{app/dist,run/docker/plugins,var/run/openvswitch,tmp,etc,proc,sys,dev}
install -d -m 0700 "$R/var/lib/ovsnet" "$R/etc/ovsnet"

# A binary and every shared library it loads, at the same paths.
copy_bin() {
  local src lib
  src=$(readlink -f "$1")
  install -D -m 0755 "$src" "$R$src"
  [ "$src" = "$1" ] || { mkdir -p "$R$(dirname "$1")"; ln -sf "$src" "$R$1"; }
  for lib in $(ldd "$src" | awk '/=>/ { print $3 } /^[[:space:]]*\// { print $1 }'); do
    [ -f "$lib" ] && [ ! -e "$R$lib" ] && install -D "$(readlink -f "$lib")" "$R$lib"
  done
  return 0
}
copy_bin /usr/bin/node
# iptables of both flavours (nft, legacy) with save/restore and ip6tables: ovsnet uses the one
# Docker uses on the host (src/driver/iptables-flavour.ts) and batches port rules (restore).
for b in iptables ip6tables; do
  for f in '' -nft -legacy; do
    for s in '' -save -restore; do [ ! -e "/usr/sbin/$b$f$s" ] || copy_bin "/usr/sbin/$b$f$s"; done
  done
done
# ovs-ofctl: the OpenFlow rules guarding logical networks' gateways (src/driver/ovs/flows.ts).
copy_bin /usr/bin/ovs-ofctl
for m in /usr/lib/x86_64-linux-gnu/xtables/*.so; do copy_bin "$m"; done

# The app: built code and production dependencies (native modules as built here).
cp -r dist/src "$R/app/dist/src"
cp package.json package-lock.json "$R/app/"
# node_modules may be a symlink (a git worktree sharing another's): copy what it points to. A
# copied symlink would be replaced by npm prune with a fresh install from its cache without the
# native builds (--ignore-scripts), and better-sqlite3 would not load in the plugin.
cp -r "$(readlink -f node_modules)" "$R/app/node_modules"
(cd "$R/app" && npm prune --omit=dev --ignore-scripts --no-audit --no-fund >/dev/null)
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$R/etc/passwd"
cp plugin/config.json "$out/config.json"
echo "managed plugin in $out ($(du -sh "$R" | cut -f1)): docker plugin create ovsnet $out"
