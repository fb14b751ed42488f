/**
 * Prometheus metrics (prom-client), served on OVSNET_METRICS_ADDR when set. One registry per
 * process; the pieces that observe (server, store, OVSDB, reconcile) get this object, never
 * prom-client itself. The daemon builds it only when it serves metrics: prom-client is loaded by
 * the constructor, so a daemon without metrics never loads it (1.2-1.3 MiB of RSS).
 */
import http from 'node:http';
import type * as Prom from 'prom-client';
import { requirePackage } from './lib/packages.js';
import { messageOf } from './lib/errors.js';
import type { Logger } from './lib/log.js';
import { portHolder } from './host/port-holder.js';
import { VERSION } from './lib/version.js';
import { registerTraffic, type TrafficSource } from './metrics-traffic.js';
import { skippedRecords } from './store/decode.js';
import type { Store } from './store/types.js';

type Counter<L extends string> = Prom.Counter<L>;
type Histogram<L extends string> = Prom.Histogram<L>;

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

export interface PoolUsage {
  readonly pool: string;
  readonly used: number;
  readonly capacity: bigint;
}

/** The multi-host picture, read at scrape time. */
export interface ClusterStats {
  readonly hosts: number;
  readonly tunnels: number;
  /** Blocks of shared pools this host owns, per pool. */
  readonly blocks: readonly { readonly pool: string; readonly owned: number }[];
}

/** Where the gauges read their values. */
export interface GaugeSources {
  readonly pools: () => readonly PoolUsage[];
  readonly cluster: () => ClusterStats;
  /** The endpoints' counters and policy drops, read from the bridge (metrics-traffic.ts); none without. */
  readonly traffic?: TrafficSource;
}

/**
 * Limits of the metrics listener, which any local user (or anyone, on a routed address) can
 * reach: a Prometheus scrape is one connection for a few milliseconds every 15-60 s, so a few
 * dozen connections are plenty; past the cap Node closes new ones at once, so they never hold a
 * descriptor the plugin socket needs. A connection silent for idleTimeoutMs is closed.
 */
export const METRICS_LIMITS = {
  /** Connections open at once; more are closed as they come. */
  maxConnections: 64,
  /** A connection with no traffic in either direction for this long is closed. */
  idleTimeoutMs: 30_000,
  /** The headers must arrive within this. */
  headersTimeoutMs: 10_000,
  /** The whole request must arrive within this. */
  requestTimeoutMs: 15_000,
  /** An idle keep-alive connection between scrapes is closed after this. */
  keepAliveTimeoutMs: 5_000,
} as const;

export class Metrics {
  private readonly prom = requirePackage('prom-client');
  readonly registry = new this.prom.Registry();
  private readonly calls = this.histogram(
    'ovsnet_docker_call_duration_seconds',
    'Latency of Docker plugin calls, by method and HTTP status code',
    ['method', 'code'],
  );
  private readonly errors = this.counter('ovsnet_errors_total', 'Errors answered to Docker, by kind and code', ['kind', 'code']);
  private readonly store = this.histogram(
    'ovsnet_store_request_duration_seconds',
    'Round trips to the state store, by operation and outcome',
    ['op', 'outcome'],
  );
  private readonly ovsdb = this.histogram(
    'ovsnet_ovsdb_request_duration_seconds',
    'Round trips to ovsdb-server, by JSON-RPC method and outcome',
    ['method', 'outcome'],
  );
  private readonly repairs = this.counter(
    'ovsnet_reconcile_repairs_total',
    'What reconcile found out of line with the store: recreated or removed',
    ['action'],
  );

  private readonly reaped = this.counter(
    'ovsnet_ipam_reaped_total',
    'Reservations released because their holder was gone: endpoint gone, container gone, never bound',
    ['reason'],
  );

  private readonly exec = new this.prom.Histogram({
    name: 'ovsnet_exec_seconds',
    help: 'Child processes ovsnet ran (iptables, ovs-ofctl, ip), by program',
    labelNames: ['program'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  private readonly ovsRestarts = this.counter(
    'ovsnet_ovs_restarts_total',
    'Restarts of Open vSwitch daemons ovsnet noticed (its connection to one lost, then back), by daemon',
    ['daemon'],
  );
  private readonly reprogram = new this.prom.Histogram({
    name: 'ovsnet_reprogram_seconds',
    help: "From ovs-vswitchd serving ovsnet's bridge again after a restart to ovsnet's flows and meters back on it",
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  private readonly execFailures = this.counter('ovsnet_exec_failures_total', 'Child processes that did not exit 0, by program', [
    'program',
  ]);

  private histogram<L extends string>(name: string, help: string, labelNames: readonly L[]): Histogram<L> {
    return new this.prom.Histogram({ name, help, labelNames, buckets: LATENCY_BUCKETS, registers: [this.registry] });
  }

  private counter<L extends string>(name: string, help: string, labelNames: readonly L[]): Counter<L> {
    return new this.prom.Counter({ name, help, labelNames, registers: [this.registry] });
  }

  /** What the gauges read at scrape time; empty until the daemon connects them (readFrom). */
  private sources: GaugeSources = { pools: () => [], cluster: () => ({ hosts: 0, tunnels: 0, blocks: [] }) };

  constructor() {
    // Under their standard names: the stock Node.js dashboards and alerts read them so. Their
    // event-loop monitor costs about 7 ms of CPU a second: one more reason to build this only when served.
    this.prom.collectDefaultMetrics({ register: this.registry });
    // Prometheus' build_info convention: constant 1, the facts in the labels.
    new this.prom.Gauge({
      name: 'ovsnet_build_info',
      help: 'The running ovsnet: version, and the Node.js runtime it runs on',
      labelNames: ['version', 'nodejs'],
      registers: [this.registry],
    }).set({ version: VERSION, nodejs: process.version }, 1);
    // Records skipped as malformed (src/store/decode.ts), read at scrape time.
    new this.prom.Counter({
      name: 'ovsnet_store_records_invalid_total',
      help: 'Store records skipped as malformed, by family (ovsnet doctor names their keys)',
      labelNames: ['family'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [family, n] of skippedRecords.byFamily) this.inc({ family }, n);
      },
    });
    // Each gauge fills itself at scrape time: from the IPAM index, the registry, the tunnels.
    const pools = () => this.sources.pools();
    const cluster = () => this.sources.cluster();
    this.gauge('ovsnet_ipam_pool_size', 'Usable addresses of each pool', () => pools().map((p) => [{ pool: p.pool }, Number(p.capacity)]));
    this.gauge('ovsnet_ipam_pool_used', 'Reserved addresses of each pool', () => pools().map((p) => [{ pool: p.pool }, p.used]));
    this.gauge('ovsnet_hosts', 'Hosts registered in the shared store, this one included', () => [[{}, cluster().hosts]]);
    this.gauge('ovsnet_vxlan_tunnels', 'VXLAN tunnel ports this host keeps to its peers', () => [[{}, cluster().tunnels]]);
    this.gauge('ovsnet_ipam_blocks_owned', 'Blocks of each shared (logical network) pool this host owns', () =>
      cluster().blocks.map((b) => [{ pool: b.pool }, b.owned]),
    );
    // Per endpoint and network, from the bridge at scrape time.
    registerTraffic(this.registry, () => this.sources.traffic);
  }

  /**
   * Connects the gauges to what they read. The daemon builds Metrics first (the store, OVSDB and
   * the server report to it) and calls this last, once IPAM, the registry and the tunnels exist.
   */
  readFrom(sources: GaugeSources): void {
    this.sources = sources;
  }

  /** A gauge whose values (by label set) are read at scrape time. */
  private gauge(name: string, help: string, values: () => [Record<string, string>, number][]): void {
    new this.prom.Gauge({
      name,
      help,
      labelNames: ['pool'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [labels, value] of values()) this.set(labels, value);
      },
    });
  }

  observeCall(method: string, status: number, seconds: number): void {
    this.calls.observe({ method, code: String(status) }, seconds);
  }

  observeError(kind: string, code: string): void {
    this.errors.inc({ kind, code });
  }

  observeOvsdb(method: string, ok: boolean, seconds: number): void {
    this.ovsdb.observe({ method, outcome: ok ? 'ok' : 'error' }, seconds);
  }

  /** A child process run by src/lib/exec.ts. */
  observeExec(program: string, ok: boolean, seconds: number): void {
    this.exec.observe({ program }, seconds);
    if (!ok) this.execFailures.inc({ program });
  }

  observeRepairs(repaired: number, removed: number): void {
    if (repaired > 0) this.repairs.inc({ action: 'recreated' }, repaired);
    if (removed > 0) this.repairs.inc({ action: 'removed' }, removed);
  }

  /** A restart of ovs-vswitchd or ovsdb-server, once the daemon is back (daemon/ovs-watch.ts). */
  observeOvsRestart(daemon: 'ovs-vswitchd' | 'ovsdb-server'): void {
    this.ovsRestarts.inc({ daemon });
  }

  /** How long ovsnet took to put its OpenFlow state back after ovs-vswitchd restarted. */
  observeReprogram(seconds: number): void {
    this.reprogram.observe(seconds);
  }

  /** A reservation released by the reaper (src/ipam-driver/recovery/orphan-reaper.ts), by reason. */
  observeReaped(reason: string): void {
    this.reaped.inc({ reason });
  }

  /** The store, with every call timed. */
  instrument(inner: Store): Store {
    const time = <T>(op: string, p: () => Promise<T>): Promise<T> => {
      const end = this.store.startTimer({ op });
      return p().then(
        (v) => {
          end({ outcome: 'ok' });
          return v;
        },
        (err: unknown) => {
          end({ outcome: 'error' });
          throw err;
        },
      );
    };
    return {
      kind: inner.kind,
      get: (k) => time('get', () => inner.get(k)),
      range: (p, o) => time('range', () => inner.range(p, o)),
      list: (p) => time('list', () => inner.list(p)),
      txn: (r) => time('txn', () => inner.txn(r)),
      watch: (p, r, h) => time('watch', () => inner.watch(p, r, h)),
      grantLease: (t) => time('grantLease', () => inner.grantLease(t)),
      keepAlive: (l) => time('keepAlive', () => inner.keepAlive(l)),
      revokeLease: (l) => time('revokeLease', () => inner.revokeLease(l)),
      revision: () => time('revision', () => inner.revision()),
      close: () => inner.close(),
    };
  }

  /**
   * Serves GET /metrics on host:port; resolves with the server once listening. An address that
   * cannot be had (taken by another process, not of this host) is logged as an error and
   * resolves undefined: metrics are worth less than the plugin socket Docker depends on.
   */
  async listen(
    host: string,
    port: number,
    log: Pick<Logger, 'error'>,
    limits: Partial<Record<keyof typeof METRICS_LIMITS, number>> = {},
  ): Promise<http.Server | undefined> {
    const l = { ...METRICS_LIMITS, ...limits };
    const server = http.createServer((req, res) => {
      if (req.method !== 'GET' || req.url !== '/metrics') {
        res.writeHead(404).end('ovsnet serves only GET /metrics here\n');
        return;
      }
      this.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': this.registry.contentType }).end(text),
        (err: unknown) => res.writeHead(500).end(String(err)),
      );
    });
    server.maxConnections = l.maxConnections;
    server.headersTimeout = l.headersTimeoutMs;
    server.requestTimeout = l.requestTimeoutMs;
    server.keepAliveTimeout = l.keepAliveTimeoutMs;
    // No 'timeout' listener: Node destroys a socket idle this long.
    server.setTimeout(l.idleTimeoutMs);
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => resolve());
      });
      return server;
    } catch (err) {
      const address = `${host.includes(':') ? `[${host}]` : host}:${port}`;
      const code = (err as { code?: string }).code;
      const why = code === 'EADDRINUSE' ? `the address is already in use, by ${portHolder(port) ?? 'another process'}` : messageOf(err);
      log.error(
        { err, address },
        `cannot serve metrics on ${address}: ${why}. ovsnet keeps serving Docker without metrics: free the port or set OVSNET_METRICS_ADDR to a free PORT or HOST:PORT, then restart ovsnet`,
      );
      server.close();
      return undefined;
    }
  }
}
