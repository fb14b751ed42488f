# Shared by the test and bench commands: install what is missing, start private services,
# stop exactly what was started. Source it; call `services_cleanup` from an EXIT trap.
set -euo pipefail

OVSNET_TMP=$(mktemp -d /tmp/ovsnet-run.XXXXXX)
STARTED_PIDS=()

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# Debian packages the tests need; apt-get runs only if one is missing.
ensure_packages() {
  local need=(docker.io openvswitch-switch etcd-server busybox-static ethtool iproute2 iptables openssl containernetworking-plugins docker-compose tcpdump podman docker-registry)
  local missing=()
  for p in "${need[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || { log "missing packages ${missing[*]}: run as root to install them"; return 1; }
    log "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$OVSNET_TMP/apt.log" 2>&1 \
      || { tail -20 "$OVSNET_TMP/apt.log" >&2; return 1; }
    # Debian's packages start their own services where an init system runs; none does here,
    # and the tests never use a system-wide service anyway.
  fi
}

free_port() { node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"; }

# etcd on loopback ports of its own and a temporary data directory.
start_etcd() {
  local client peer dir
  client=$(free_port); peer=$(free_port)
  dir="$OVSNET_TMP/etcd"
  mkdir -p "$dir"
  etcd --name ovsnet-test --data-dir "$dir/data" \
    --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "ovsnet-test=http://127.0.0.1:$peer" >"$dir/etcd.log" 2>&1 &
  STARTED_PIDS+=($!)
  for _ in $(seq 100); do
    if node -e "fetch('http://127.0.0.1:$client/health').then(r=>r.json()).then(j=>process.exit(j.health==='true'?0:1),()=>process.exit(1))" 2>/dev/null; then
      export TEST_ETCD_ENDPOINTS="127.0.0.1:$client"
      log "etcd up on 127.0.0.1:$client (pid ${STARTED_PIDS[-1]})"
      return 0
    fi
    sleep 0.1
  done
  log "etcd did not become healthy:"; tail -20 "$dir/etcd.log" >&2; return 1
}

# Stops what this run started, by recorded PID only (never by name), then removes its files.
services_cleanup() {
  local pid
  for pid in "${STARTED_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${STARTED_PIDS[@]}"; do
    for _ in $(seq 50); do
      { [ -e "/proc/$pid" ] && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$pid/stat" 2>/dev/null; } || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  done
  rm -rf "$OVSNET_TMP"
}
