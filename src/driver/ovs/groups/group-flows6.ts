/**
 * Endpoint groups on IPv6 (group-flows.ts's flows for a dual-stack parent): the same conntrack
 * tables with `ipv6` in place of `ip`, and Neighbor Discovery in place of ARP. A member's
 * Neighbor Solicitation for an address of its own group is switched on its tag; for any other
 * address of the subnet, the gateway's included, table 41 answers it with a Neighbor
 * Advertisement carrying the gateway's MAC (proxy ND), so cross-group traffic goes to the
 * gateway. Duplicate Address Detection (source ::) is never answered: it would make the member
 * give its address up. The ND flows sit one above the conntrack ones: userspace conntrack does
 * not track ND, and a member's unicast NS to the gateway's MAC must be answered, not routed.
 *
 * OVS 3.1 (userspace datapath) cannot set nd_tll in a flow matching type 135, so the answer is
 * two flows: the first turns the solicitation around (MACs, addresses: the target becomes the
 * source, as RFC 4861 7.2.4 wants; multicast sources are dropped on receipt), makes it type 136
 * with the solicited and override flags and a target link-layer option in place of the source
 * one, hop limit 255 (RFC 4861 7.1.2), and resubmits; the second, matching type 136, writes the
 * gateway's MAC into that option and sends it back. Every action is written as ovs-ofctl dumps it,
 * so a sync (flow-sync.ts's diff-flows) sees no change on a bridge already holding them.
 */
import {
  ARP_TABLE as ND_TABLE,
  PRIORITY,
  TO_GATEWAY_TABLE,
  TO_MEMBER_TABLE,
  conntrackFlows,
  type GroupMember,
  type GroupPlan,
} from './group-tables.js';

/** group-flows.ts's builders, shared so both families' flows read the same. */
export interface FlowParts {
  /** `cookie,table,priority,reg7=parent` of a flow of one of the parent's tables. */
  readonly at: (table: number, priority: number) => string;
  /** `cookie,priority=400` of a table-0 flow. */
  readonly head: string;
  /** The actions putting a member's group in reg6 and the parent's tag in reg7. */
  readonly mark: (m: GroupMember) => string;
  /** A member's meter and DSCP actions, if it has QoS. */
  readonly qos: (m: GroupMember) => string;
}

/** Neighbor Advertisement flags: solicited and override (RFC 4861 4.4); not router: the answer speaks for any address. */
const NA_FLAGS = '0x60000000';

/** The solicitation turned around into an advertisement of `mac` (the second half sets the option). */
function naReply(mac: string): string {
  return [
    'move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]',
    `set_field:${mac}->eth_src`,
    'move:NXM_NX_IPV6_SRC[]->NXM_NX_IPV6_DST[]',
    'move:NXM_NX_ND_TARGET[]->NXM_NX_IPV6_SRC[]',
    'set_field:255->nw_ttl',
    'set_field:2->nd_options_type',
    `set_field:${NA_FLAGS}->nd_reserved`,
    'set_field:136->icmpv6_type',
    `resubmit(,${ND_TABLE})`,
  ].join(',');
}

/** The IPv6 flows of a plan: none unless the parent is dual-stack. Pure. */
export function groupFlows6(plan: GroupPlan, { at, head, mark, qos }: FlowParts): string[] {
  const { parentTag: p, gateway: gw, subnet6 } = plan;
  if (subnet6 === undefined || gw.address6 === undefined) return [];
  const cookie = head.slice(0, head.indexOf(',priority='));
  const nd = `${cookie},priority=${PRIORITY + 1}`;
  // The gateway's ICMPv6 redirects stay on the bridge, as its ICMP ones do (group-flows.ts).
  const flows: string[] = [`${nd},in_port=${gw.ofport},icmp6,icmp_type=137,actions=drop`];
  for (const m of plan.members) {
    if (m.address6 === undefined) continue;
    flows.push(
      `${nd},in_port=${m.ofport},icmp6,icmp_type=135,actions=${mark(m)},resubmit(,${ND_TABLE})`,
      `${nd},in_port=${m.ofport},icmp6,dl_dst=${gw.mac},icmp_type=136,actions=output:${gw.ofport}`,
      `${head},in_port=${m.ofport},ipv6,dl_dst=${gw.mac},actions=${qos(m)}${mark(m)},ct(zone=${p},table=${TO_GATEWAY_TABLE})`,
      `${nd},in_port=${gw.ofport},icmp6,icmp_type=135,nd_target=${m.address6},actions=output:${m.ofport}`,
      `${nd},in_port=${gw.ofport},icmp6,dl_dst=${m.mac},icmp_type=136,actions=output:${m.ofport}`,
      `${head},in_port=${gw.ofport},ipv6,dl_dst=${m.mac},actions=${mark(m)},load:${m.ofport}->NXM_NX_REG5[],ct(zone=${p},table=${TO_MEMBER_TABLE})`,
      `${at(ND_TABLE, 20)},reg6=${m.group},icmp6,icmp_type=135,nd_target=${m.address6},actions=NORMAL`,
    );
  }
  flows.push(
    `${at(ND_TABLE, 30)},icmp6,ipv6_src=::,icmp_type=135,actions=NORMAL`,
    `${at(ND_TABLE, 10)},icmp6,icmp_type=135,nd_target=${subnet6},actions=${naReply(gw.mac)}`,
    `${at(ND_TABLE, 10)},icmp6,icmp_type=136,actions=set_field:${gw.mac}->nd_tll,IN_PORT`,
    ...conntrackFlows(plan, at, 'ipv6'),
  );
  return flows;
}
