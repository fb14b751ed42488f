/**
 * The metrics gauges read at scrape time, connected to what they read (Metrics.readFrom): IPAM's
 * pools and blocks, the registry's hosts, the tunnels, and the endpoints' counters from the bridge.
 */
import type { Logger } from '../lib/log.js';
import type { Metrics } from '../metrics.js';
import type { Ipam } from '../ipam-driver/ipam.js';
import type { HostRegistry } from '../cluster/hosts.js';
import type { Tunnels } from '../driver/vxlan/tunnels.js';
import { TrafficCounters, type TrafficCountersDeps } from '../driver/upkeep/traffic-counters.js';

export interface GaugeParts extends Omit<TrafficCountersDeps, 'log' | 'records'> {
  readonly log: Logger;
  /** This host's networks (the driver's records). */
  readonly driver: TrafficCountersDeps['records'];
  readonly hostName: string;
  readonly ipam: Pick<Ipam, 'usage'>;
  readonly registry: Pick<HostRegistry, 'hosts'>;
  readonly tunnels: Pick<Tunnels, 'count'>;
}

export function connectGauges(metrics: Metrics, parts: GaugeParts): void {
  const { ipam, registry, tunnels, hostName } = parts;
  // The endpoints' counters and policy drops, read from the bridge at scrape time.
  const log = parts.log.child({ component: 'metrics' });
  const traffic = new TrafficCounters({ records: parts.driver, ovs: parts.ovs, openflow: parts.openflow, log });
  // The IPAM usage gauges read the index at scrape time.
  metrics.readFrom({
    pools: () => ipam.usage().map((u) => ({ pool: u.pool, used: u.count, capacity: u.capacity })),
    cluster: () => ({
      hosts: registry.hosts().size,
      tunnels: tunnels.count,
      blocks: ipam
        .usage()
        .flatMap((u) => (u.blocks === undefined ? [] : [{ pool: u.pool, owned: u.blocks.filter((b) => b.host === hostName).length }])),
    }),
    traffic: () => traffic.read(),
  });
}
