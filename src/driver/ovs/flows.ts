/**
 * OpenFlow rules that keep a logical network's gateway local. Every host holds the same gateway
 * address; without these rules an ARP for it would cross the tunnels, every host would answer,
 * and containers would send outbound traffic through whichever answered last. So frames from a
 * tunnel of the network's VNI that ask for or announce the gateway (ARP, IPv6 neighbour
 * discovery) are dropped; the rest takes NORMAL. ovs-ofctl runs through openflow.ts, at network
 * creation and reconcile only, never on the container start path; a periodic check
 * (NetworkDriver.checkGuards) puts the flows back after ovs-vswitchd restarts. Each network's
 * flows carry a cookie of their own (a prefix + the VNI). VLAN networks on the uplink are guarded
 * the same way, against frames arriving on the uplink with their tag.
 */
import { OpenFlow } from './openflow.js';

const COOKIE_PREFIX = 0x0f5en << 48n;
/** VLAN networks on the uplink: their own cookie space, keyed by the tag. */
const VLAN_COOKIE_PREFIX = 0x0f5fn << 48n;

/**
 * Which frames a guard applies to: those from the VXLAN tunnels of a VNI, or (a VLAN network
 * over the uplink, uplink/uplink.ts) those arriving on the uplink with the network's tag.
 */
export type GuardSegment = { readonly vni: number } | { readonly vlan: number; readonly uplink: string };

const cookieOf = (s: GuardSegment) =>
  `0x${('vni' in s ? COOKIE_PREFIX | BigInt(s.vni) : VLAN_COOKIE_PREFIX | BigInt(s.vlan)).toString(16)}`;

/** The flows guarding `gateways` (plain addresses) of the network on this segment. Pure. */
export function guardFlows(segment: GuardSegment, gateways: readonly string[]): string[] {
  const from = 'vni' in segment ? `tun_id=${segment.vni}` : `in_port=${segment.uplink},dl_vlan=${segment.vlan}`;
  const head = `cookie=${cookieOf(segment)},priority=100,${from}`;
  return gateways.flatMap((gw) =>
    gw.includes(':')
      ? [`${head},icmp6,icmp_type=135,nd_target=${gw},actions=drop`, `${head},icmp6,icmp_type=136,nd_target=${gw},actions=drop`]
      : [`${head},arp,arp_tpa=${gw},actions=drop`, `${head},arp,arp_spa=${gw},actions=drop`],
  );
}

export class Flows {
  constructor(private readonly of: OpenFlow = new OpenFlow()) {}

  /** Installs (or re-installs: add-flow replaces an identical flow) the gateway guard. */
  async guardGateway(bridge: string, segment: GuardSegment, gateways: readonly string[]): Promise<void> {
    for (const flow of guardFlows(segment, gateways)) await this.of.ofctl(['add-flow', bridge, flow]);
  }

  /** How many of this segment's guard flows the bridge has now (0 after ovs-vswitchd restarted). */
  async guardCount(bridge: string, segment: GuardSegment): Promise<number> {
    const out = await this.of.ofctl(['dump-flows', bridge, `cookie=${cookieOf(segment)}/-1`]);
    return out.split('\n').filter((l) => l.includes('cookie=')).length;
  }

  async unguardGateway(bridge: string, segment: GuardSegment): Promise<void> {
    await this.of.ofctl(['del-flows', bridge, `cookie=${cookieOf(segment)}/-1`]);
  }
}
