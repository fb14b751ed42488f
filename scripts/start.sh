#!/usr/bin/env bash
# `npm start`, the quick start: on a fresh Debian or Ubuntu host, as root, installs Open vSwitch
# if missing, starts it if it is not running, installs dependencies and builds if needed, and
# runs `ovsnet serve` in the foreground with the embedded store. Settings: OVSNET_* (docs/settings.md).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'ovsnet start: %s\n' "$*" >&2; }

if ! command -v ovs-vsctl >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || { say "Open vSwitch is not installed; run this as root to install it (apt-get install openvswitch-switch)"; exit 1; }
  say "installing Open vSwitch"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openvswitch-switch >/dev/null
fi
if ! ovs-vsctl --timeout=3 show >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || { say "Open vSwitch is not running; run this as root to start it"; exit 1; }
  say "starting Open vSwitch"
  if [ -d /run/systemd/system ]; then
    systemctl start openvswitch-switch
  else
    # No init system (containers, CI): the package's own control script. Without the
    # openvswitch kernel module it skips modprobe; ovsnet then uses the userspace datapath.
    /usr/share/openvswitch/scripts/ovs-ctl start --system-id=random --no-record-hostname >/dev/null
  fi
  ovs-vsctl --timeout=10 show >/dev/null
fi

[ -d node_modules ] || npm ci --no-audit --no-fund
# Build only when a source is newer than the build (a running test suite may be reading dist/).
if [ ! -f dist/src/main.js ] || [ -n "$(find src -newer dist/src/main.js -name '*.ts' -print -quit)" ]; then
  npx tsc -p tsconfig.json
fi
# The CNI plugin, for podman and other CNI runtimes on this host (docs/cni.md); CNI_BIN_DIR
# names another directory than /opt/cni/bin.
if [ "$(id -u)" = 0 ]; then bash scripts/cni-install.sh "${CNI_BIN_DIR:-/opt/cni/bin}" >&2; else say "not root: the CNI plugin is not installed"; fi
# The V8 heap settings of plugin/config.json's entrypoint (src/daemon/memory.ts says why).
exec node --max-semi-space-size=1 --optimize-for-size --expose-gc dist/src/main.js serve
