/**
 * `-o com.docker.network.bridge.enable_icc=false` on the bridge: the network's containers cannot
 * reach each other at all, at layer 2 included, while each reaches the gateway (and through it
 * the host, the outside and its published ports) as on any network. Per network, in table 0,
 * above endpoint QoS (300) and endpoint groups (400), below swarm VIPs (500-510):
 *
 * - From a member's port, only what is for the gateway leaves, and only to the gateway's port:
 *   frames to the gateway's MAC, ARP for a gateway address, IPv6 Neighbor Solicitations for a
 *   gateway address (or a link-local one) and Router Solicitations. The rest is dropped: ARP and
 *   ND for another member, frames to another member's MAC, every other broadcast and multicast,
 *   so nothing of a member's reaches another member, a tunnel or the uplink. A member's QoS
 *   (qos-flows.ts's meter, its DSCP mark) rides along, as these flows take its traffic ahead of
 *   qos-flows.ts's.
 * - From the gateway's port: frames to a member's MAC, and its ARP and ND for a member's
 *   address, go straight to that member's port (the bridge learns no member's MAC, since their
 *   frames bypass NORMAL: without these the gateway's unicast would flood every member); the
 *   rest (broadcast, unknown addresses) takes NORMAL. Its ICMP and ICMPv6 redirects ("reach that
 *   member directly") stay on the bridge.
 * - Across hosts: every frame of the network arriving from another host (the VNI's tunnels, or
 *   the uplink with the network's tag) is dropped. Every host keeps its own gateway (flows.ts),
 *   so nothing legitimate crosses: only another host's members, or its gateway, could send it.
 *
 * A member routed to another through the gateway (a frame to the gateway's MAC, another member's
 * address inside) is the host's to refuse: nat-rules.ts drops it in iptables, as Docker's bridge
 * driver does (`-i BRIDGE -o BRIDGE -j DROP`). Flows only, matches and actions both datapaths have.
 * Every flow carries the network's icc cookie (cookies.ts: the feature and the network's tag), so
 * each drop flow's counters are the packets the policy stopped on that network. Pure.
 */
import { FEATURE, cookieOf, hex } from '../ovs/cookies.js';
import { meterId } from '../ovs/qos-flows.js';
import type { Qos } from '../model/qos-options.js';

/** Above endpoint QoS (300) and endpoint groups (400), below swarm VIPs (500-510). */
export const ICC_PRIORITY = 450;

/** A container of the network on this host. */
export interface IccMember {
  readonly ofport: number;
  readonly mac: string;
  /** Its IPv4 address, without prefix length. */
  readonly address?: string;
  /** Its IPv6 address, without prefix length. */
  readonly address6?: string;
  /** Its QoS (model/qos-options.ts's effectiveQos), if any: metered and marked here as qos-flows.ts does. */
  readonly qos?: Qos;
}

export interface IccPlan {
  readonly tag: number;
  /** The gateway port, its MAC and addresses (no prefix length); absent for --internal: members reach nothing. */
  readonly gateway?: {
    readonly ofport: number;
    readonly mac: string;
    readonly addresses: readonly string[];
    readonly addresses6: readonly string[];
  };
  readonly members: readonly IccMember[];
  /** Where other hosts' frames of the network arrive: the VNI's tunnels, or the uplink (its OpenFlow number) on the tag. */
  readonly segment?: { readonly vni: number } | { readonly uplinkPort: number; readonly vlan: number };
}

export const iccCookie = (tag: number): bigint => cookieOf(FEATURE.icc, tag);

/** Link-local targets: a router is reached at its link-local address too (RFC 4861). */
const LINK_LOCAL = 'fe80::/10';

/** Every flow of the plan's network. Pure. */
export function iccFlows(plan: IccPlan): string[] {
  const cookie = `cookie=${hex(iccCookie(plan.tag))}`;
  const at = (priority: number) => `${cookie},priority=${ICC_PRIORITY + priority}`;
  const flows: string[] = [];
  const gw = plan.gateway;
  const members = [...plan.members].sort((a, b) => a.ofport - b.ofport);
  if (gw !== undefined) {
    flows.push(
      `${at(3)},in_port=${gw.ofport},icmp,icmp_type=5,actions=drop`,
      `${at(3)},in_port=${gw.ofport},icmp6,icmp_type=137,actions=drop`,
    );
  }
  for (const m of members) {
    const from = `in_port=${m.ofport}`;
    if (gw !== undefined) {
      const meter = m.qos?.rateKbps === undefined ? '' : `meter:${meterId(m.ofport)},`;
      const out = `actions=${meter}output:${gw.ofport}`;
      if (m.qos?.dscp !== undefined) {
        const mark = `actions=${meter}set_field:${m.qos.dscp}->ip_dscp,output:${gw.ofport}`;
        flows.push(`${at(2)},${from},ip,dl_dst=${gw.mac},${mark}`, `${at(2)},${from},ipv6,dl_dst=${gw.mac},${mark}`);
      }
      flows.push(`${at(1)},${from},dl_dst=${gw.mac},${out}`);
      for (const a of gw.addresses) flows.push(`${at(1)},${from},arp,arp_tpa=${a},${out}`);
      if (gw.addresses6.length > 0) {
        for (const a of [...gw.addresses6, LINK_LOCAL]) flows.push(`${at(1)},${from},icmp6,icmp_type=135,nd_target=${a},${out}`);
        flows.push(`${at(1)},${from},icmp6,icmp_type=133,${out}`);
      }
      const to = `in_port=${gw.ofport}`;
      flows.push(`${at(1)},${to},dl_dst=${m.mac.toLowerCase()},actions=output:${m.ofport}`);
      if (m.address !== undefined) flows.push(`${at(2)},${to},arp,arp_tpa=${m.address},actions=output:${m.ofport}`);
      if (m.address6 !== undefined) flows.push(`${at(2)},${to},icmp6,icmp_type=135,nd_target=${m.address6},actions=output:${m.ofport}`);
    }
    flows.push(`${at(0)},${from},actions=drop`);
  }
  const s = plan.segment;
  if (s !== undefined) flows.push(`${at(0)},${'vni' in s ? `tun_id=${s.vni}` : `in_port=${s.uplinkPort},dl_vlan=${s.vlan}`},actions=drop`);
  return flows;
}
