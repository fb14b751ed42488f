#!/usr/bin/env bash
# A simulated Docker host on this machine (docs/test-hosts.md): its own network, mount
# and UTS namespaces, its own dockerd (and containerd), a private /run so /run/docker/plugins,
# /var/run/docker.sock and /var/run/openvswitch are per host.
#
#   host.sh up NAME DIR      create the host, start dockerd, load the test image
#   host.sh exec NAME DIR -- CMD...   run CMD inside the host
#   host.sh restart-dockerd NAME DIR   stop dockerd (SIGTERM) and start it again
#   host.sh underlay-up NAME DIR          a namespace with a bridge that hosts attach to
#   host.sh attach NAME DIR UNDERLAY ADDR  give host NAME an underlay link (ul0) with ADDR
#   host.sh restart-vswitchd NAME DIR   restart ovs-vswitchd (its database stays)
#   host.sh stop-vswitchd|start-vswitchd NAME DIR   the two halves of a restart
#   host.sh restart-ovsdb NAME DIR   restart ovsdb-server (its database file stays)
#   host.sh down NAME DIR    stop everything it started (by recorded PID), remove all traces
#
# `up` and `underlay-up` also start a watcher (`host.sh reap`): when the process that asked for
# the host ends without taking it down (a test file killed at its timeout runs no teardown),
# the watcher takes it down, so that its dockerd and OVS do not load every file after it.
#
# Processes are stopped only by the PIDs recorded in DIR, after checking they are in the
# host's network namespace; never by name.
set -euo pipefail
# HOST_TRACE=FILE: a timestamped trace of every step, for finding where teardown spends time.
if [ -n "${HOST_TRACE:-}" ]; then PS4='+ $(date +%T.%N) '; exec 2>>"$HOST_TRACE"; set -x; fi
cmd=$1 name=$2 D=$3
shift 3

enter() { nsenter --net="/run/netns/$name" --mount="$D/mntns" --uts="$D/utsns" -- "$@"; }

netns_inode() { stat -L -c %i "/run/netns/$name" 2>/dev/null || echo none; }

alive() { [ -e "/proc/$1" ] && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat" 2>/dev/null; }

# PIDs whose network namespace is inode $1, in one pass over /proc.
host_pids() {
  find /proc -mindepth 3 -maxdepth 3 -path '/proc/[0-9]*/ns/net' -lname "net:\[$1\]" 2>/dev/null | cut -d/ -f3
}

# Starts the watcher of this host (or underlay) for the process that asked for it: bash's parent.
watch_owner() {
  echo "$PPID" >"$D/owner"
  setsid bash "$0" reap "$name" "$D" </dev/null >/dev/null 2>&1 &
}

# Waits for the owner to end (tail checks it every second, no process per check), then takes the
# host down unless the owner did: its `down` removed DIR.
reap() {
  local owner
  read -r owner <"$D/owner" || return 0
  tail --pid="$owner" -f /dev/null
  [ -d "$D" ] && down
  return 0
}

in_host() { [ "$(stat -L -c %i "/proc/$1/ns/net" 2>/dev/null || echo x)" = "$(netns_inode)" ]; }

stop_pid() { # PID: TERM, wait up to 30 s, then KILL
  local pid=$1
  alive "$pid" && in_host "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 300); do alive "$pid" || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}

start_dockerd() {
  rm -f "$D/run/docker.pid" # left only by a daemon that was killed
  # --init: containers run under docker-init, so they stop on SIGTERM at once and a dockerd
  # restart takes a second, not the 10 s stop timeout of a PID 1 that ignores SIGTERM.
  # A plain command (not the enter function) so that $! is dockerd itself: nsenter execs it.
  # TMPDIR: containerd (dockerd's child) writes a goroutine dump there when signalled, and the
  # machine's /tmp is not the host's to write.
  TMPDIR="$D/tmp" nsenter --net="/run/netns/$name" --mount="$D/mntns" --uts="$D/utsns" -- dockerd --data-root=/var/lib/docker --exec-root=/var/run/docker --pidfile=/var/run/docker.pid \
    -H unix:///var/run/docker.sock --cgroup-parent="/$name" --shutdown-timeout=2 --init ${DOCKERD_ARGS:-} >>"$D/log/dockerd.log" 2>&1 &
  echo $! >"$D/dockerd.pid"
  for _ in $(seq 300); do
    docker -H "unix://$D/run/docker.sock" version >/dev/null 2>&1 && return 0
    alive "$(cat "$D/dockerd.pid")" || break
    sleep 0.1
  done
  tail -20 "$D/log/dockerd.log" >&2
  return 1
}

start_ovsdb() {
  enter ovsdb-server /run/openvswitch/conf.db --remote=punix:/var/run/openvswitch/db.sock \
    --pidfile=/var/run/openvswitch/ovsdb-server.pid --detach --log-file="$D/log/ovsdb-server.log"
  cp "$D/run/openvswitch/ovsdb-server.pid" "$D/ovsdb-server.pid"
}

start_vswitchd() {
  enter ovs-vswitchd unix:/var/run/openvswitch/db.sock --pidfile=/var/run/openvswitch/ovs-vswitchd.pid \
    --detach --log-file="$D/log/ovs-vswitchd.log"
  cp "$D/run/openvswitch/ovs-vswitchd.pid" "$D/ovs-vswitchd.pid"
}

# Open vSwitch inside the host: its own database and ovs-vswitchd (userspace datapath here).
start_ovs() {
  enter ovsdb-tool create /run/openvswitch/conf.db /usr/share/openvswitch/vswitch.ovsschema
  start_ovsdb
  enter ovs-vsctl --no-wait init
  start_vswitchd
}

up() {
  ip netns add "$name"
  ip -n "$name" link set lo up
  mkdir -p "$D"/{run,lib-docker,etc-docker,ovs,cg,log,image/bin,tmp}
  touch "$D/mntns" "$D/utsns"
  # Persistent namespace files must sit on a mount that does not propagate.
  mount --bind "$D" "$D"
  mount --make-private "$D"
  watch_owner
  nsenter --net="/run/netns/$name" -- unshare --mount="$D/mntns" --uts="$D/utsns" --propagation private -- sh -ec "
    hostname $name
    findmnt -rn -t nsfs -o TARGET | sort -r | while read -r m; do umount \"\$m\" 2>/dev/null || true; done
    mount --rbind /sys/fs/cgroup $D/cg
    mount -t sysfs sysfs /sys
    mount --rbind $D/cg /sys/fs/cgroup
    umount -R $D/cg
    mount --bind $D/run /run
    mkdir -p /run/docker/plugins /run/openvswitch /run/lock /run/netns
    mkdir -p /var/lib/docker /etc/docker
    mount --bind $D/lib-docker /var/lib/docker
    mount --bind $D/etc-docker /etc/docker
  "
  start_ovs
  start_dockerd
  # The test image: busybox-static and the applets tests use.
  cp /bin/busybox "$D/image/bin/busybox"
  for a in sh ip ping nc wget sleep cat true ifconfig route hostname; do ln -sf busybox "$D/image/bin/$a"; done
  mkdir -p "$D/image/tmp" "$D/image/etc"
  tar -C "$D/image" -c . | docker -H "unix://$D/run/docker.sock" import - ovsnet-test/busybox:latest >/dev/null
}

down() {
  set +e # best effort: every step runs whatever the previous one did
  local sock="unix://$D/run/docker.sock" pid
  if [ -S "$D/run/docker.sock" ] && [ -f "$D/dockerd.pid" ] && alive "$(cat "$D/dockerd.pid")"; then
    ids=$(timeout 20 docker -H "$sock" ps -aq 2>/dev/null || true)
    [ -n "$ids" ] && timeout 30 docker -H "$sock" rm -f $ids >/dev/null 2>&1 || true
  fi
  for f in "$D"/*.pid; do [ -f "$f" ] && stop_pid "$(cat "$f")"; done
  # Whatever is left in the host's namespace (containerd shims, containers).
  if [ -e "/run/netns/$name" ]; then
    local ino
    ino=$(netns_inode)
    for _ in $(seq 50); do
      left=$(host_pids "$ino")
      [ -z "$left" ] && break
      for pid in $left; do alive "$pid" && kill -KILL "$pid" 2>/dev/null || true; done
      live=0
      for pid in $left; do alive "$pid" && live=1; done
      [ $live = 0 ] && break
      sleep 0.1
    done
  fi
  umount "$D/mntns" 2>/dev/null || true
  umount "$D/utsns" 2>/dev/null || true
  # The bind mount of DIR on itself: busy for a moment while the last processes exit.
  for _ in $(seq 30); do mountpoint -q "$D" || break; umount "$D" 2>/dev/null || sleep 0.1; done
  ip netns del "$name" 2>/dev/null || true
  # Directories the owner made for this host elsewhere (a cluster's etcd data in /dev/shm), a
  # path a line; only the owner's own kind of names are removed.
  if [ -f "$D/also" ]; then
    while read -r extra; do
      case $extra in /dev/shm/ovsnet-* | /tmp/ovsnet-*) [[ $extra == *..* ]] || rm -rf -- "$extra" ;; esac
    done <"$D/also"
  fi
  for cg in /sys/fs/cgroup/*/"$name"; do
    [ -d "$cg" ] && find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  rm -rf "$D"
}

# The underlay several hosts share: a namespace holding a bridge (NAME and DIR are its own).
underlay_up() {
  ip netns add "$name"
  ip -n "$name" link set lo up
  ip -n "$name" link add br0 type bridge
  ip -n "$name" link set br0 up
  mkdir -p "$D"
  watch_owner
}

# attach UNDERLAY ADDR/LEN: a veth from this host (ul0, MTU 1600) to the underlay's bridge. The
# address goes on br-phy, an OVS bridge owning ul0: OVS native tunnelling on the userspace
# datapath needs the tunnel endpoint there (docs/test-hosts.md). br-phy gets a MAC of its
# own and ul0 no ARP or IPv6, else OVS sees every frame twice.
attach() {
  local underlay=$1 addr=$2 peer mac
  peer="u-${name:$((${#name} > 10 ? ${#name} - 10 : 0))}" # at most 12 characters
  ip link add ul0 netns "$name" mtu 1600 type veth peer name "$peer" netns "$underlay" mtu 1600
  ip -n "$underlay" link set "$peer" master br0 up
  mac=$(printf '02:b0:%02x:%02x:%02x:%02x' $(echo "${addr%/*}" | tr . ' '))
  enter ovs-vsctl add-br br-phy -- set bridge br-phy datapath_type=netdev fail-mode=standalone \
    other_config:hwaddr="$mac" -- add-port br-phy ul0
  enter sysctl -qw net.ipv6.conf.ul0.disable_ipv6=1
  ip -n "$name" link set ul0 arp off up
  ip -n "$name" link set br-phy mtu 1600 up
  ip -n "$name" addr add "$addr" dev br-phy
}

case $cmd in
  up) up ;;
  underlay-up) underlay_up ;;
  attach) attach "$@" ;;
  exec) [ "${1:-}" = -- ] && shift; enter "$@" ;;
  restart-dockerd) stop_pid "$(cat "$D/dockerd.pid")"; start_dockerd ;;
  # ovs-vswitchd only: the database (ports, tunnels) stays, OpenFlow rules go. On the userspace
  # datapath the host's underlay (br-phy) is down while it is stopped.
  restart-vswitchd) stop_pid "$(cat "$D/ovs-vswitchd.pid")"; start_vswitchd ;;
  stop-vswitchd) stop_pid "$(cat "$D/ovs-vswitchd.pid")" ;;
  start-vswitchd) start_vswitchd ;;
  # ovsdb-server only: the database file (bridges, ports) stays; ovs-vswitchd reconnects to it.
  restart-ovsdb) stop_pid "$(cat "$D/ovsdb-server.pid")"; start_ovsdb ;;
  down) down ;;
  reap) reap ;;
  *) echo "usage: host.sh up|exec|down NAME DIR" >&2; exit 2 ;;
esac
