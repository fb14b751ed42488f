/**
 * The endpoints' traffic and the policy drops as Prometheus counters, filled at scrape time from
 * what the daemon reads of its bridges (driver/upkeep/traffic-counters.ts): one read per scrape
 * (and one for scrapes within a second of each other), bounded in time. A series exists while its
 * endpoint (or network) does: each scrape sets exactly the live ones. A scrape whose read failed
 * (OVS away, past the timeout) has no series of these, and the rest of the metrics as always.
 */
import type { Registry } from 'prom-client';
import { requirePackage } from './lib/packages.js';

export interface EndpointCounters {
  readonly network: string;
  readonly endpoint: string;
  readonly sentPackets: number;
  readonly sentBytes: number;
  readonly receivedPackets: number;
  readonly receivedBytes: number;
  readonly policyDrops: number;
}

/** What one read found; undefined when it could not read. */
export interface Traffic {
  readonly endpoints: readonly EndpointCounters[];
  readonly networks: readonly { readonly network: string; readonly policyDrops: number }[];
}

export type TrafficSource = () => Promise<Traffic | undefined>;

const ENDPOINT_SERIES: readonly [string, string, keyof EndpointCounters][] = [
  ['ovsnet_endpoint_sent_packets_total', 'Packets the endpoint (its container) sent onto the bridge', 'sentPackets'],
  ['ovsnet_endpoint_sent_bytes_total', 'Bytes the endpoint (its container) sent onto the bridge', 'sentBytes'],
  ['ovsnet_endpoint_received_packets_total', 'Packets the bridge delivered to the endpoint (its container)', 'receivedPackets'],
  ['ovsnet_endpoint_received_bytes_total', 'Bytes the bridge delivered to the endpoint (its container)', 'receivedBytes'],
  [
    'ovsnet_endpoint_policy_drops_total',
    "Packets the endpoint sent that ovsnet's rules dropped (rules matching its port; a group's refusals are its network's only)",
    'policyDrops',
  ],
];

/** Registers the counters; each reads `source()` (which shares one read among them) at scrape time. */
export function registerTraffic(registry: Registry, source: () => TrafficSource | undefined): void {
  const { Counter } = requirePackage('prom-client'); // loaded with the registry, by Metrics
  const read = async (): Promise<Traffic | undefined> => {
    const s = source();
    return s === undefined ? undefined : s().catch(() => undefined);
  };
  for (const [name, help, field] of ENDPOINT_SERIES) {
    new Counter({
      name,
      help,
      labelNames: ['network', 'endpoint'],
      registers: [registry],
      async collect() {
        const t = await read();
        this.reset();
        for (const e of t?.endpoints ?? []) this.inc({ network: e.network, endpoint: e.endpoint }, e[field] as number);
      },
    });
  }
  new Counter({
    name: 'ovsnet_policy_drops_total',
    help: "Packets ovsnet's rules dropped on this host, by network (endpoint groups, enable_icc=false, egress/ingress rules); summed over the hosts, the cluster's",
    labelNames: ['network'],
    registers: [registry],
    async collect() {
      const t = await read();
      this.reset();
      for (const n of t?.networks ?? []) this.inc({ network: n.network }, n.policyDrops);
    },
  });
}
