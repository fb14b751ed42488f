#!/usr/bin/env bash
# `npm run bench -- <suite>`: starts the services a benchmark needs (its own etcd), runs it,
# stops them. Suites: store, ipam, driver, cluster.
cd "$(dirname "$0")/.."
source scripts/lib.sh
trap services_cleanup EXIT
start_etcd
node dist/bench/main.js "$@"
