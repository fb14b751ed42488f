/**
 * What endpoint groups' IPv4 flows (group-flows.ts) and IPv6 ones (group-flows6.ts) share: the
 * plan they read, their tables and priority, and the conntrack tables' rules, the same for both
 * families: to the gateway (table 43) a new connection is committed with the sender's group in
 * ct_mark; to a member (table 42) established and related packets pass, and new connections
 * from outside the groups (ct_mark 0) or from a group the member's group allows (an allow with a
 * port: that port of its protocol only). The tables' final drops are group-flows.ts's, once for
 * both.
 */
import type { GroupAllow } from '../../model/group-options.js';
import type { Qos } from '../../model/qos-options.js';

/** Above NORMAL (0), the gateway guard (100) and endpoint QoS (300). */
export const PRIORITY = 400;
export const ARP_TABLE = 41;
export const TO_MEMBER_TABLE = 42;
export const TO_GATEWAY_TABLE = 43;

/** An endpoint of the parent or of one of its groups, on this bridge. */
export interface GroupMember {
  readonly ofport: number;
  readonly mac: string;
  /** Its IPv4 address, without prefix length. */
  readonly address: string;
  /** Its IPv6 address, without prefix length, on a dual-stack parent. */
  readonly address6?: string;
  /** Its network's tag: the group it is in (the parent's tag for the parent's own endpoints). */
  readonly group: number;
  /**
   * Its QoS (model/qos-options.ts's effectiveQos), if any: these flows take its IPv4 and IPv6 to the gateway ahead of
   * qos-flows.ts's, so they meter (with the meter qos-flows.ts installed, its meterId of the
   * port: apply the endpoint's QoS first) and mark it too.
   */
  readonly qos?: Qos;
}

export interface GroupPlan {
  readonly parentTag: number;
  /** The gateway port; `address6`: its IPv6 address on a dual-stack parent. */
  readonly gateway: { readonly ofport: number; readonly mac: string; readonly address: string; readonly address6?: string };
  /** The parent's IPv4 subnet (CIDR), shared by its groups. */
  readonly subnet: string;
  /** The parent's IPv6 subnet (CIDR) on a dual-stack parent: with it, the IPv6 flows (group-flows6.ts). */
  readonly subnet6?: string;
  /** Every group's tag, the parent's included: a group reaches itself through the gateway too. */
  readonly groups: readonly number[];
  readonly members: readonly GroupMember[];
  readonly allows: readonly GroupAllow[];
  /** A logical parent's family on other hosts (group-remote.ts); absent for a one-host parent. */
  readonly remote?: RemotePlan;
}

/* Groups across hosts (group-remote.ts's flows). */

/** A member of the parent's family on another host. */
export interface RemoteMember {
  /** Its IPv4 address, and its IPv6 one on a dual-stack parent, without prefix length. */
  readonly address?: string;
  readonly address6?: string;
  readonly mac: string;
  /** The number this plan gives its group on its host (reg4); see RemotePlan.allows. */
  readonly group: number;
  /** The OpenFlow port of the tunnel to its host, on the parent's VNI. */
  readonly tunnel: number;
}

/** What a parent's plan holds when the parent is a logical network with members elsewhere. */
export interface RemotePlan {
  /** The parent's VNI: the segment routed packets travel on. */
  readonly vni: number;
  /** The source MAC of routed packets: the parent's, the same on every host (routerMac). */
  readonly routerMac: string;
  readonly members: readonly RemoteMember[];
  /**
   * Who may open connections to whom: `from` a local group's tag (reg6, as group-flows.ts marks
   * it), `to` a remote group's number (RemoteMember.group), a member's own group included.
   */
  readonly allows: readonly GroupAllow[];
  /** Each remote group's number: its name and host (for ovsnet trace's words). */
  readonly groups: ReadonlyMap<number, { readonly name: string; readonly host: string }>;
}

/** What the family on other hosts adds to a parent's plan (groups/remote-family.ts). */
export interface RemotePart {
  /** Undefined when no other host has a network of the parent. */
  readonly plan: RemotePlan | undefined;
  /** Whether another host has a group of the parent. */
  readonly groups: boolean;
  /** Remote endpoints left out: no tunnel to their host yet, or no address. */
  readonly skipped: readonly string[];
}

/** The conntrack tables' rules of one family (`ip` or `ipv6`). Pure. */
export function conntrackFlows(plan: GroupPlan, at: (table: number, priority: number) => string, l3: 'ip' | 'ipv6'): string[] {
  const { parentTag: p, gateway: gw } = plan;
  const six = l3 === 'ipv6' ? '6' : '';
  const pass = `actions=output:NXM_NX_REG5[]`;
  const flows = [
    `${at(TO_GATEWAY_TABLE, 10)},ct_state=+new+trk,${l3},actions=ct(commit,zone=${p},exec(move:NXM_NX_REG6[]->NXM_NX_CT_MARK[])),output:${gw.ofport}`,
    `${at(TO_GATEWAY_TABLE, 10)},ct_state=+est+trk,${l3},actions=output:${gw.ofport}`,
    `${at(TO_GATEWAY_TABLE, 10)},ct_state=+rel+trk,${l3},actions=output:${gw.ofport}`,
    `${at(TO_MEMBER_TABLE, 30)},ct_state=+est+trk,${l3},${pass}`,
    `${at(TO_MEMBER_TABLE, 30)},ct_state=+rel+trk,${l3},${pass}`,
    `${at(TO_MEMBER_TABLE, 20)},ct_state=+new+trk,ct_mark=0,${l3},actions=ct(commit,zone=${p}),output:NXM_NX_REG5[]`,
  ];
  for (const g of plan.groups) flows.push(`${at(TO_MEMBER_TABLE, 20)},ct_state=+new+trk,reg6=${g},ct_mark=${g},${l3},${pass}`);
  for (const a of plan.allows) {
    const match = a.port === undefined ? l3 : `${a.port.proto}${six},tp_dst=${a.port.number}`;
    flows.push(`${at(TO_MEMBER_TABLE, 20)},ct_state=+new+trk,reg6=${a.to},ct_mark=${a.from},${match},${pass}`);
  }
  return flows;
}
