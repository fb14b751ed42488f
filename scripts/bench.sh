#!/usr/bin/env bash
# `npm run bench -- <suite>`: installs what the benchmarks need if missing (as the test command
# does: the driver and cluster suites run dockerd and Open vSwitch in simulated hosts), starts
# their own etcd, runs the suite, stops what it started. Suites: see bench/main.ts (store, ipam, driver, links, cluster, churn, builds, scale, restart, startup, vip, requests, policy).
cd "$(dirname "$0")/.."
source scripts/lib.sh
trap services_cleanup EXIT
ensure_packages
start_etcd
node --expose-gc dist/bench/main.js "$@"
