/**
 * A network's egress and ingress rules on the bridge (-o ovsnet.egress, -o ovsnet.ingress:
 * model/policy-options.ts), stateful with conntrack: both datapaths track (the userspace one
 * since OVS 2.6). In table 0 at 460, above endpoint QoS (300), endpoint groups (400) and
 * enable_icc=false (450-453), below swarm VIPs (500, 510):
 *
 * - a member's IPv4 and IPv6 to a way out (the gateway port's MAC, an infra port's) put the
 *   network's tag in reg8 and go through its zone (0x3000 + the tag) to table 62;
 * - what a way out sends (to a member's MAC, when the way is shared by a parent and its groups;
 *   else to any unicast MAC, so that a logical network's members on other hosts are covered too)
 *   goes through the zone to table 63.
 *
 * Tables 62 (out) and 63 (in): Neighbor Discovery passes (conntrack does not track it), so do
 * established and related packets; a new connection from a group's member to a routed peer of
 * its subnet (the gateway's and the infra port's own addresses aside: the host is outside) is
 * the groups' to rule and passes; any other new one is looked up in table 64 (the egress rules,
 * by destination, and DNS to the host's resolvers) or 65 (the ingress rules, by source, and the
 * members' published ports), or committed when the network has no such rules. What passes is
 * committed and resubmitted to table 0, where reg8 set keeps these flows from matching again:
 * QoS, groups, enable_icc=false and NORMAL then do what they do without rules (the rules
 * compose with each of them). The rest is dropped by a flow under the network's cookie (the
 * tables' priority-1 flows: policy drops, counted per network by upkeep/traffic-stats.ts).
 * Pure: the flows for flow-sync.ts to install; egress.ts plans them from the records;
 * docs/egress.md walks through them.
 */
import { formatAddress, formatPrefix, parseAddress, prefix, type Family } from '../../lib/cidr.js';
import type { NetRule } from '../model/policy-options.js';
import { FEATURE, cookieOf, hex, only, type CookieScope } from '../ovs/cookies.js';

/** Above QoS (300), endpoint groups (400) and enable_icc=false (450-453), below swarm VIPs (500, 510). */
export const POLICY_PRIORITY = 460;
export const OUT_TABLE = 62;
export const IN_TABLE = 63;
export const EGRESS_TABLE = 64;
export const INGRESS_TABLE = 65;
/** Where a packet of a ruled network carries its tag: nonzero once it has been through the rules. */
const REG = 'reg8';

export const egressCookie = (tag: number): bigint => cookieOf(FEATURE.egress, tag);
export const egressScope = (tag: number): CookieScope => only(egressCookie(tag));
/** Groups use the tag itself, VIPs 0x1000 and 0x2000 + the tag. */
export const egressZone = (tag: number): number => 0x3000 + tag;

/** A way out of the network: its gateway port, or its infra port. */
export interface Way {
  readonly ofport: number;
  readonly mac: string;
  /** The port's own addresses on the network, without prefix length. */
  readonly addresses: readonly string[];
}

export interface PolicyMember {
  readonly ofport: number;
  readonly mac: string;
  /** Its published ports: the container's port and protocol. */
  readonly published: readonly { readonly proto: string; readonly port: number }[];
}

export interface EgressPlan {
  readonly tag: number;
  readonly ways: readonly Way[];
  /** The network's subnets (a group's: its parent's). */
  readonly subnets: readonly string[];
  /** A parent or group of endpoint groups: its ways are shared, and the subnet's other addresses are routed peers. */
  readonly peers: boolean;
  /** This host's endpoints of the network that have a port on the bridge. */
  readonly members: readonly PolicyMember[];
  readonly egress?: readonly NetRule[];
  readonly ingress?: readonly NetRule[];
  /** Where DNS (port 53, UDP and TCP) always passes to: the host's resolvers, or any address when they are unknown. */
  readonly dns: readonly string[] | 'any';
}

interface FamilyWords {
  readonly l3: string;
  readonly src: string;
  readonly dst: string;
  readonly six: string;
}
const WORDS: Readonly<Record<Family, FamilyWords>> = {
  4: { l3: 'ip', src: 'nw_src', dst: 'nw_dst', six: '' },
  6: { l3: 'ipv6', src: 'ipv6_src', dst: 'ipv6_dst', six: '6' },
};
const ND_TYPES = [133, 134, 135, 136, 137];
const UNICAST = 'dl_dst=00:00:00:00:00:00/01:00:00:00:00:00';
const MAC = /^[0-9a-f]{2}(?::[0-9a-f]{2}){5}$/;
const PROTOS = new Set(['tcp', 'udp', 'sctp']);

/** A prefix as ovs-ofctl takes it, and its family; undefined for anything that is not one (a record is input). */
function canonPrefix(cidr: string): { text: string; family: Family } | undefined {
  try {
    const p = prefix(cidr);
    return cidr === cidr.trim() ? { text: formatPrefix(p), family: p.family } : undefined;
  } catch {
    return undefined;
  }
}
function canonAddress(address: string): { text: string; family: Family } | undefined {
  try {
    const a = parseAddress(address);
    return address === address.trim() ? { text: formatAddress(a.family, a.value), family: a.family } : undefined;
  } catch {
    return undefined;
  }
}
const validPort = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 1 && (n as number) <= 65535;

/** A rule's match on `side` (the destination for egress, the source for ingress); undefined for a rule that is not one. */
function ruleMatch(r: NetRule, side: 'src' | 'dst'): string | undefined {
  const p = canonPrefix(r.cidr);
  if (p === undefined) return undefined;
  const w = WORDS[p.family];
  if (r.port === undefined) return `${w.l3},${w[side]}=${p.text}`;
  if (!validPort(r.port.number) || (r.port.proto !== 'tcp' && r.port.proto !== 'udp')) return undefined;
  return `${r.port.proto}${w.six},${w[side]}=${p.text},tp_dst=${r.port.number}`;
}

/** Every flow of one network's rules; none without members or a way out. Pure. */
export function egressFlows(plan: EgressPlan): string[] {
  const { tag } = plan;
  const ways = plan.ways.map((w) => ({ ...w, mac: w.mac.toLowerCase() })).filter((w) => MAC.test(w.mac) && validPort(w.ofport));
  const members = plan.members.map((m) => ({ ...m, mac: m.mac.toLowerCase() })).filter((m) => MAC.test(m.mac) && validPort(m.ofport));
  if (ways.length === 0 || members.length === 0) return [];
  const cookie = `cookie=${hex(egressCookie(tag))}`;
  const zone = egressZone(tag);
  const at = (table: number, priority: number) => `${cookie},table=${table},priority=${priority},${REG}=${tag}`;
  const head = `${cookie},priority=${POLICY_PRIORITY},${REG}=0`;
  const into = (table: number) => `actions=set_field:0x${tag.toString(16)}->${REG},ct(zone=${zone},table=${table})`;
  const pass = 'actions=resubmit(,0)';
  const commit = `actions=ct(commit,zone=${zone}),resubmit(,0)`;
  const flows: string[] = [];
  for (const l3 of ['ip', 'ipv6']) {
    for (const w of ways) {
      for (const m of members) flows.push(`${head},in_port=${m.ofport},dl_dst=${w.mac},${l3},${into(OUT_TABLE)}`);
      if (!plan.peers) flows.push(`${head},in_port=${w.ofport},${UNICAST},${l3},${into(IN_TABLE)}`);
      else for (const m of members) flows.push(`${head},in_port=${w.ofport},dl_dst=${m.mac},${l3},${into(IN_TABLE)}`);
    }
  }
  const own = ways.flatMap((w) => w.addresses.map(canonAddress)).filter((a) => a !== undefined);
  const subnets = plan.subnets.map(canonPrefix).filter((p) => p !== undefined);
  const direction = (table: number, rules: readonly NetRule[] | undefined, next: number, side: 'src' | 'dst') => {
    flows.push(...ND_TYPES.map((type) => `${at(table, 60)},icmp6,icmp_type=${type},${pass}`));
    flows.push(`${at(table, 50)},ct_state=+est+trk,${pass}`, `${at(table, 50)},ct_state=+rel+trk,${pass}`);
    if (rules !== undefined && plan.peers) {
      for (const a of own)
        flows.push(
          `${at(table, 45)},ct_state=+new+trk,${WORDS[a.family].l3},${WORDS[a.family][side]}=${a.text},actions=resubmit(,${next})`,
        );
      for (const s of subnets)
        flows.push(`${at(table, 40)},ct_state=+new+trk,${WORDS[s.family].l3},${WORDS[s.family][side]}=${s.text},${commit}`);
    }
    // ct() needs an IP match: without rules, a commit per family.
    if (rules === undefined)
      flows.push(`${at(table, 30)},ct_state=+new+trk,ip,${commit}`, `${at(table, 30)},ct_state=+new+trk,ipv6,${commit}`);
    else flows.push(`${at(table, 30)},ct_state=+new+trk,actions=resubmit(,${next})`);
    flows.push(`${at(table, 1)},actions=drop`);
    if (rules === undefined) return;
    const matches = new Set(rules.map((r) => ruleMatch(r, side)).filter((m) => m !== undefined));
    for (const match of matches) flows.push(`${at(next, 20)},${match},${commit}`);
    flows.push(`${at(next, 1)},actions=drop`);
  };
  direction(OUT_TABLE, plan.egress, EGRESS_TABLE, 'dst');
  if (plan.egress !== undefined) flows.push(...dnsFlows(plan.dns, at, commit));
  direction(IN_TABLE, plan.ingress, INGRESS_TABLE, 'src');
  if (plan.ingress !== undefined) {
    const published = new Set<string>();
    for (const m of members) {
      for (const p of m.published) {
        if (!PROTOS.has(p.proto) || !validPort(p.port)) continue;
        for (const six of ['', '6']) published.add(`${at(INGRESS_TABLE, 30)},dl_dst=${m.mac},${p.proto}${six},tp_dst=${p.port},${commit}`);
      }
    }
    flows.push(...published);
  }
  return flows;
}

/** DNS to the host's resolvers (or to any address), UDP and TCP, among the egress rules. */
function dnsFlows(dns: EgressPlan['dns'], at: (table: number, priority: number) => string, commit: string): string[] {
  const servers = dns === 'any' ? [undefined] : [...new Set(dns.map(canonAddress).filter((a) => a !== undefined))];
  return servers.flatMap((s) =>
    ['tcp', 'udp'].flatMap((proto) =>
      ([4, 6] as const)
        .filter((f) => s === undefined || s.family === f)
        .map(
          (f) =>
            `${at(EGRESS_TABLE, 10)},${proto}${WORDS[f].six},${s === undefined ? '' : `${WORDS[f].dst}=${s.text},`}tp_dst=53,${commit}`,
        ),
    ),
  );
}
