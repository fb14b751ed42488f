/**
 * What each endpoint sent and received, and what ovsnet's rules dropped, read from the bridge's
 * OpenFlow statistics: `ovs-ofctl dump-ports` (one per bridge) and `dump-flows` of ovsnet's drop
 * features (one per bridge), both with `--names` so that ports and `in_port` matches come by name
 * (an endpoint's is its record's hostVeth) and no port-number table is read besides. A port's rx
 * is what the container sent (its veth's far end), its tx what it received.
 *
 * Policy drops are the packets of ovsnet's flows whose actions are `drop` in the features that
 * refuse traffic (cookies.ts): endpoint groups (0x0f60, low bits the parent's tag), enable_icc=false
 * (0x0f62) and egress/ingress rules (0x0f63), these two with the network's tag. A drop flow
 * matching an endpoint's in_port counts for that endpoint and its network; any other for the
 * network only (a group's conntrack tables match registers: their drops are the parent's). The
 * gateway's ICMP redirects a parent drops (group-flows.ts) refuse nothing: not counted.
 *
 * Pure but for readBridge(): what the counters become is attribute()'s, over raw values (the CLI)
 * or over what moved since the last read (traffic-counters.ts, the metrics).
 */
import { FEATURE, scopeArg, type CookieScope } from '../ovs/cookies.js';
import type { OpenFlow } from '../ovs/openflow.js';

/** The features whose drop flows are policy drops: groups, enable_icc=false, egress/ingress rules. */
export const POLICY_DROP_FEATURES: readonly bigint[] = [FEATURE.groups, 0x0f62n, 0x0f63n];

/** 0x0f60-0x0f63 (the three above and VIPs, left out by feature): what dump-flows is asked for. */
const DROP_SCOPE: CookieScope = { value: 0x0f60n << 48n, mask: 0xfffcn << 48n };

/** One port's OpenFlow statistics, as OVS counts them (from the bridge's side). */
export interface PortStats {
  readonly rxPackets: number;
  readonly rxBytes: number;
  readonly txPackets: number;
  readonly txBytes: number;
}

/** One flow of dump-flows. */
export interface FlowStats {
  readonly cookie: bigint;
  /** The flow without its statistics (cookie, table, priority, match): the same flow reads the same. */
  readonly key: string;
  readonly packets: number;
  /** Its in_port match, by name (`--names`), if any. */
  readonly inPort?: string;
  readonly drop: boolean;
}

/** A counted thing on a bridge (a port or a flow): its identity and its values. */
export interface Source {
  readonly key: string;
  readonly values: readonly number[];
}

/** What one read of a bridge found. */
export interface BridgeStats {
  readonly bridge: string;
  readonly ports: ReadonlyMap<string, PortStats>;
  readonly flows: readonly FlowStats[];
}

const count = (s: string | undefined): number => (s === undefined || s === '?' ? 0 : Number(s));
const unquote = (name: string): string => (name.startsWith('"') && name.endsWith('"') ? name.slice(1, -1).replace(/\\(.)/g, '$1') : name);

/** `ovs-ofctl --names dump-ports` (OpenFlow 1.0 or 1.3 text) by port name; LOCAL left out. */
export function parsePortStats(text: string): Map<string, PortStats> {
  const ports = new Map<string, PortStats>();
  // Each port: its rx line, its tx line, and (OpenFlow 1.3) its duration line, not read.
  const blocks = text.split(/\n(?=\s*port\s)/);
  for (const block of blocks) {
    const head = /^\s*port\s+("(?:[^"\\]|\\.)*"|[^\s:]+):\s*rx pkts=(\d+|\?), bytes=(\d+|\?)/.exec(block);
    const tx = /\btx pkts=(\d+|\?), bytes=(\d+|\?)/.exec(block);
    if (head === null || tx === null || head[1] === 'LOCAL') continue;
    ports.set(unquote(head[1] ?? ''), {
      rxPackets: count(head[2]),
      rxBytes: count(head[3]),
      txPackets: count(tx[1]),
      txBytes: count(tx[2]),
    });
  }
  return ports;
}

/** The statistics fields of a dump-flows line, left out of its key. */
const STATS = /^(duration|n_packets|n_bytes|idle_age|hard_age)=/;

/** `ovs-ofctl --names dump-flows` text, one entry per flow line. */
export function parseFlowStats(text: string): FlowStats[] {
  const flows: FlowStats[] = [];
  for (const line of text.split('\n')) {
    const at = line.indexOf(' actions=');
    const cookie = /^\s*cookie=(0x[0-9a-f]+)/i.exec(line);
    if (at < 0 || cookie === null) continue;
    const head = line.slice(0, at).trim();
    const actions = line.slice(at + ' actions='.length).trim();
    const fields = head.split(/,\s*/);
    const inPort = fields.find((f) => f.startsWith('in_port='))?.slice('in_port='.length);
    flows.push({
      cookie: BigInt(cookie[1] ?? '0'),
      key: fields.filter((f) => !STATS.test(f)).join(','),
      packets: count(/(?:^|,\s*)n_packets=(\d+)/.exec(head)?.[1]),
      ...(inPort === undefined ? {} : { inPort: unquote(inPort) }),
      drop: actions === 'drop',
    });
  }
  return flows;
}

const featureOf = (cookie: bigint): bigint => cookie >> 48n;
/** The network's tag in a drop feature's cookie (bit 32, the groups' old generation, aside). */
export const tagOf = (cookie: bigint): number => Number(cookie & 0xffffffffn);

/** An ICMP or ICMPv6 redirect (the parent's gateway's, which group-flows.ts drops): no policy. */
const REDIRECT = /(?:^|,)(?:icmp,(?:.*,)?icmp_type=5|icmp6,(?:.*,)?icmp_type=137)(?:,|$)/;

/** Whether a flow is a policy drop (see the header). */
export const isPolicyDrop = (f: FlowStats): boolean =>
  f.drop && POLICY_DROP_FEATURES.includes(featureOf(f.cookie)) && !REDIRECT.test(f.key);

/** Reads a bridge: one dump-ports, one dump-flows (ovsnet's drop features only), each within `timeoutMs`. */
export async function readBridge(of: OpenFlow, bridge: string, timeoutMs: number): Promise<BridgeStats> {
  // Not repeated: a scrape waits for no retry; the next one reads again.
  const call = { of13: true, repeatable: false, timeoutMs } as const;
  const [ports, flows] = await Promise.all([
    of.ofctl(['--names', 'dump-ports', bridge], call),
    of.ofctl(['--names', 'dump-flows', bridge, scopeArg(DROP_SCOPE)], call),
  ]);
  return { bridge, ports: parsePortStats(ports), flows: parseFlowStats(flows).filter(isPolicyDrop) };
}

/** A bridge's ports and policy drop flows as sources: [rx pkts, rx bytes, tx pkts, tx bytes] or [packets]. */
export function sourcesOf(stats: BridgeStats): Source[] {
  return [
    ...[...stats.ports].map(([name, p]) => ({
      key: `${stats.bridge} port ${name}`,
      values: [p.rxPackets, p.rxBytes, p.txPackets, p.txBytes],
    })),
    ...stats.flows.map((f) => ({ key: `${stats.bridge} flow ${f.key}`, values: [f.packets] })),
  ];
}

/** An endpoint's counters, from the container's side. */
export interface EndpointTraffic {
  sentPackets: number;
  sentBytes: number;
  receivedPackets: number;
  receivedBytes: number;
  policyDrops: number;
}

/** Where an endpoint is: its bridge, its port's name, its network. */
export interface EndpointPlace {
  readonly endpointId: string;
  readonly networkId: string;
  readonly bridge: string;
  readonly port: string;
}

/** A network on a bridge, by the tag its drop flows carry. */
export interface NetworkPlace {
  readonly networkId: string;
  readonly bridge: string;
  readonly tag: number;
}

/** What attribute() found: counters per endpoint ID (those whose port was read), policy drops per network ID. */
export interface Attributed {
  readonly endpoints: Map<string, EndpointTraffic>;
  readonly networks: Map<string, number>;
}

/**
 * The counters of each endpoint and network from the bridges read, where `valueOf` says what a
 * source counts (its raw values for the CLI, what moved since the last read for the metrics).
 * Pure.
 */
export function attribute(
  read: readonly BridgeStats[],
  endpoints: readonly EndpointPlace[],
  networks: readonly NetworkPlace[],
  valueOf: (key: string, raw: readonly number[]) => readonly number[] = (_k, raw) => raw,
): Attributed {
  const out: Attributed = { endpoints: new Map(), networks: new Map() };
  const byPort = new Map(endpoints.map((e) => [`${e.bridge} ${e.port}`, e]));
  const byTag = new Map<string, string>();
  for (const n of networks) if (!byTag.has(`${n.bridge} ${n.tag}`)) byTag.set(`${n.bridge} ${n.tag}`, n.networkId);
  const sources = new Map(read.flatMap((s) => sourcesOf(s).map((src) => [src.key, src.values])));
  const v = (key: string) => valueOf(key, sources.get(key) ?? []);
  for (const stats of read) {
    for (const name of stats.ports.keys()) {
      const ep = byPort.get(`${stats.bridge} ${name}`);
      if (ep === undefined) continue;
      const [rxP = 0, rxB = 0, txP = 0, txB = 0] = v(`${stats.bridge} port ${name}`);
      out.endpoints.set(ep.endpointId, { sentPackets: rxP, sentBytes: rxB, receivedPackets: txP, receivedBytes: txB, policyDrops: 0 });
    }
    for (const f of stats.flows) {
      const [n = 0] = v(`${stats.bridge} flow ${f.key}`);
      const network = byTag.get(`${stats.bridge} ${tagOf(f.cookie)}`);
      if (network !== undefined) out.networks.set(network, (out.networks.get(network) ?? 0) + n);
      const ep = f.inPort === undefined ? undefined : out.endpoints.get(byPort.get(`${stats.bridge} ${f.inPort}`)?.endpointId ?? '');
      if (ep !== undefined) ep.policyDrops += n;
    }
  }
  return out;
}
