/**
 * OpenFlow rules that keep a logical network's gateway local. Every host holds the same gateway
 * address; without these rules an ARP for it would cross the tunnels, every host would answer,
 * and containers would send outbound traffic through whichever answered last. So frames from a
 * tunnel of the network's VNI that ask for or announce the gateway (ARP, IPv6 neighbour
 * discovery) are dropped; the rest takes NORMAL. ovs-ofctl runs through openflow.ts, at network
 * creation, never on the container start path; after ovs-vswitchd restarts they come back with
 * the rest of the bridge's flows (openflow-state.ts). Each network's flows carry a cookie of
 * their own (cookies.ts: the guard's feature + the VNI). VLAN networks on the uplink are guarded
 * the same way, against frames arriving on the uplink with their tag.
 */
import { FEATURE, cookieOf, hex } from './cookies.js';
import { OpenFlow } from './openflow.js';

/**
 * Which frames a guard applies to: those from the VXLAN tunnels of a VNI, or (a VLAN network
 * over the uplink, uplink/uplink.ts) those arriving on the uplink with the network's tag.
 */
export type GuardSegment = { readonly vni: number } | { readonly vlan: number; readonly uplink: string };

const guardCookie = (s: GuardSegment) => hex('vni' in s ? cookieOf(FEATURE.guardVni, s.vni) : cookieOf(FEATURE.guardVlan, s.vlan));

/** The flows guarding `gateways` (plain addresses) of the network on this segment. Pure. */
export function guardFlows(segment: GuardSegment, gateways: readonly string[]): string[] {
  const from = 'vni' in segment ? `tun_id=${segment.vni}` : `in_port=${segment.uplink},dl_vlan=${segment.vlan}`;
  const head = `cookie=${guardCookie(segment)},priority=100,${from}`;
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

  async unguardGateway(bridge: string, segment: GuardSegment): Promise<void> {
    await this.of.ofctl(['del-flows', bridge, `cookie=${guardCookie(segment)}/-1`]);
  }
}
