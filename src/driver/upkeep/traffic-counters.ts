/**
 * The per-endpoint and per-network counters the metrics export (src/metrics-traffic.ts), read at
 * scrape time from the bridges (traffic-stats.ts) and kept monotonic here: OVS counts from 0
 * again for what it adds again (ovsnet's flows after ovs-vswitchd restarted, a port whose veth
 * was made again). ovsnet keeps, per port and per flow, the values it read last and adds to each
 * series only what moved since (Monotonic); so a series never goes down while ovsnet runs (a
 * restart of ovsnet starts its series again from OVS's counts: a counter reset, which
 * Prometheus' rate() and increase() take). An endpoint's series is kept while its port is on
 * the bridge and its network among this host's records, a network's while it is among them;
 * each is forgotten when that ends.
 *
 * An endpoint's port is found by what OVS holds, not by the store: its external_ids name its
 * endpoint and network (external-ids.ts). So a read costs the ports on this host's bridges and
 * this host's network records, whatever the number of endpoint records: 10k records on a host
 * cost a scrape nothing, and hosts sharing etcd do not each read every host's endpoints. An
 * endpoint with no port (created, not joined) has no traffic and no series.
 *
 * A read costs one dump-ports and one dump-flows per bridge of this host's networks, one OVSDB
 * select of ovsnet's ports and one store read (the networks); reads within `cacheMs` of one
 * another share it (concurrent scrapes make one), one read runs at a time, and a read is bounded
 * by `timeoutMs`: past it, or with OVS or the store away, the answer is undefined (no endpoint
 * series this scrape) and the totals are kept for the next.
 */
import { messageOf } from '../../lib/errors.js';
import type { Logger } from '../../lib/log.js';
import type { NetworkRecord } from '../model/records.js';
import { isSwarmNetworkId } from '../model/records.js';
import type { OpenFlow } from '../ovs/openflow.js';
import { endpointOf, networkOf } from '../ovs/external-ids.js';
import type { OvsApi } from '../effects/deps.js';
import { attribute, readBridge, sourcesOf, type BridgeStats, type EndpointTraffic, type Source } from './traffic-stats.js';

/**
 * What moved since the last read, per source: a new source moved by its whole values, one read
 * lower than before started again from 0 (all it shows moved), any other by the difference.
 * Never below 0. Remembers exactly the sources given: those gone are forgotten. Pure but for its
 * memory.
 *
 * By values alone, not by the sources' ages (dump-ports' and dump-flows' duration): a port's
 * counts can be the kernel's, kept while ovs-vswitchd restarts and adds the port again with a
 * new age, and a flow replaced by an identical one may keep its counts under a new age; taking
 * a younger source for one counting from 0 would count those twice. The price: a source that
 * starts again and counts past its last value before the next read is taken for one that went
 * on (what it counted between that read and its restart is lost, never counted twice).
 */
export class Monotonic {
  private last = new Map<string, readonly number[]>();

  deltas(sources: readonly Source[]): Map<string, number[]> {
    const out = new Map<string, number[]>();
    const next = new Map<string, readonly number[]>();
    for (const s of sources) {
      const before = this.last.get(s.key);
      const restarted = before === undefined || s.values.some((v, i) => v < (before[i] ?? 0));
      out.set(
        s.key,
        s.values.map((v, i) => (restarted ? v : v - (before[i] ?? 0))),
      );
      next.set(s.key, s.values);
    }
    this.last = next;
    return out;
  }

  /** How many sources it remembers (bounded by what the last read found). */
  get size(): number {
    return this.last.size;
  }
}

/** The metrics' labels: the network as every host names it, the endpoint by its 12-character ID. */
export function networkLabel(n: Pick<NetworkRecord, 'networkId' | 'logical'>): string {
  // A logical network has an ID per host but one name: by it, the hosts' series add up.
  return n.logical !== undefined && !isSwarmNetworkId(n.networkId) ? n.logical : n.networkId.slice(0, 12);
}

export interface TrafficSnapshot {
  readonly endpoints: readonly ({ readonly network: string; readonly endpoint: string } & Readonly<EndpointTraffic>)[];
  readonly networks: readonly { readonly network: string; readonly policyDrops: number }[];
}

export interface TrafficCountersDeps {
  /** This host's networks (driver-records.ts). */
  readonly records: { localNetworks(): Promise<NetworkRecord[]> };
  /** The ports ovsnet made, with their external_ids: an endpoint's names it and its network. */
  readonly ovs: Pick<OvsApi, 'ownPorts'>;
  readonly openflow: OpenFlow;
  readonly log: Pick<Logger, 'warn' | 'info'>;
  readonly cacheMs?: number;
  readonly timeoutMs?: number;
  readonly now?: () => number;
}

export class TrafficCounters {
  private readonly sources = new Monotonic();
  private readonly endpointTotals = new Map<string, { network: string; endpoint: string } & EndpointTraffic>();
  private readonly networkTotals = new Map<string, number>();
  private cached: { at: number; answer: Promise<TrafficSnapshot | undefined> } | undefined;
  /** A read past its timeout still running: the next waits for none, and never overlaps it. */
  private running = false;
  /** Whether the last read failed (said once per change in the log). */
  private failing = false;

  constructor(private readonly deps: TrafficCountersDeps) {}

  /** The counters now (see the header); never rejects. */
  read(): Promise<TrafficSnapshot | undefined> {
    const now = this.now();
    if (this.cached !== undefined && now - this.cached.at < (this.deps.cacheMs ?? 1000)) return this.cached.answer;
    const answer = this.bounded().then(
      (s) => this.said(undefined, s),
      (err: unknown) => this.said(err, undefined),
    );
    this.cached = { at: now, answer };
    return answer;
  }

  private said(err: unknown, s: TrafficSnapshot | undefined): TrafficSnapshot | undefined {
    if ((err !== undefined) !== this.failing) {
      this.failing = err !== undefined;
      if (this.failing)
        this.deps.log.warn(
          { err },
          `cannot read the endpoints' counters from the bridge: ${messageOf(err)}; no endpoint series until it can`,
        );
      else this.deps.log.info("the endpoints' counters are read from the bridge again");
    }
    return s;
  }

  /** A monotonic clock (milliseconds): a change of the wall clock must not read as sources added again. */
  private now(): number {
    return this.deps.now?.() ?? performance.now();
  }

  private bounded(): Promise<TrafficSnapshot> {
    const ms = this.deps.timeoutMs ?? 3000;
    // Two reads at once would each take the other's values for a restart: one at a time.
    if (this.running) return Promise.reject(new Error(`the last read, past ${ms} ms, has not ended yet`));
    this.running = true;
    const collecting = this.collect(ms).finally(() => (this.running = false));
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    });
    collecting.catch(() => undefined); // answered through the race; its late failure is no one's
    return Promise.race([collecting, late]).finally(() => clearTimeout(timer));
  }

  private async collect(timeoutMs: number): Promise<TrafficSnapshot> {
    const [networks, ports] = await Promise.all([this.deps.records.localNetworks(), this.deps.ovs.ownPorts()]);
    const byId = new Map(networks.map((n) => [n.networkId, n]));
    const bridges = [...new Set(networks.map((n) => n.bridge))];
    const read: BridgeStats[] = await Promise.all(bridges.map((b) => readBridge(this.deps.openflow, b, timeoutMs)));
    const moved = this.sources.deltas(read.flatMap((s) => sourcesOf(s)));
    const places = ports.flatMap((p) => {
      const endpointId = endpointOf(p);
      const n = byId.get(networkOf(p) ?? '');
      return endpointId === undefined || n === undefined
        ? []
        : [{ endpointId, networkId: n.networkId, network: n, bridge: n.bridge, port: p.name }];
    });
    const placeOf = new Map(places.map((p) => [p.endpointId, p]));
    const found = attribute(read, places, networks, (key) => moved.get(key) ?? []);
    for (const id of this.endpointTotals.keys()) if (!placeOf.has(id)) this.endpointTotals.delete(id);
    for (const id of this.networkTotals.keys()) if (!byId.has(id)) this.networkTotals.delete(id);
    for (const [id, d] of found.endpoints) {
      const n = placeOf.get(id)?.network;
      const t = this.endpointTotals.get(id) ?? {
        network: n === undefined ? '' : networkLabel(n),
        endpoint: id.slice(0, 12),
        ...{ sentPackets: 0, sentBytes: 0, receivedPackets: 0, receivedBytes: 0, policyDrops: 0 },
      };
      t.sentPackets += d.sentPackets;
      t.sentBytes += d.sentBytes;
      t.receivedPackets += d.receivedPackets;
      t.receivedBytes += d.receivedBytes;
      t.policyDrops += d.policyDrops;
      this.endpointTotals.set(id, t);
    }
    for (const n of networks)
      this.networkTotals.set(n.networkId, (this.networkTotals.get(n.networkId) ?? 0) + (found.networks.get(n.networkId) ?? 0));
    return {
      endpoints: [...this.endpointTotals.values()].map((t) => ({ ...t })),
      networks: networks.map((n) => ({ network: networkLabel(n), policyDrops: this.networkTotals.get(n.networkId) ?? 0 })),
    };
  }
}
