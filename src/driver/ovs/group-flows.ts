/**
 * Endpoint groups on the bridge: the OpenFlow rules that make a parent network's groups one
 * subnet split at layer 2, with traffic between groups going through the parent's gateway and
 * dropped unless the receiving group allows the sender. Members sit on access ports of their
 * group's tag, the gateway on the parent's; proxy ARP (table 41), conntrack with the sender's
 * group in ct_mark (tables 43, then 42 for the allow check) do the rest: docs/endpoint-groups.md,
 * "The flows", walks through them. Conntrack and registers work on both datapaths (userspace
 * conntrack since OVS 2.6). The parent is a group of its own (its tag is its group). Every flow
 * carries the parent's cookie (groupCookie): GroupFlows.apply swaps a plan for the next one in
 * one OpenFlow bundle (flow-sync.ts). IPv4 only.
 */
import { readFile } from 'node:fs/promises';
import { messageOf, OvsnetError } from '../../lib/errors.js';
import { FEATURE, cookieOf, hex, scopeArg, type CookieScope } from './cookies.js';
import { FlowSync } from './flow-sync.js';
import { OpenFlow } from './openflow.js';
import { meterId } from './qos-flows.js';
import type { GroupAllow } from '../model/group-options.js';
import type { Qos } from '../model/qos-options.js';

/** Above NORMAL (0), the gateway guard (100) and endpoint QoS (300). */
const PRIORITY = 400;
export const ARP_TABLE = 41;
export const TO_MEMBER_TABLE = 42;
export const TO_GATEWAY_TABLE = 43;

/** A parent's flows carry its cookie: the groups' feature and the parent's tag (cookies.ts). */
export const groupCookie = (parentTag: number): string => hex(cookieOf(FEATURE.groups, parentTag));

/**
 * Every flow of a parent: its cookie, bit 32 aside (ovsnet 0.x flipped it between plans, so a
 * bridge programmed by it still holds flows with it set: they are the parent's too).
 */
export const groupScope = (parentTag: number): CookieScope => ({
  value: cookieOf(FEATURE.groups, parentTag),
  mask: 0xfffffffeffffffffn,
});

/** An endpoint of the parent or of one of its groups, on this bridge. */
export interface GroupMember {
  readonly ofport: number;
  readonly mac: string;
  /** Its IPv4 address, without prefix length. */
  readonly address: string;
  /** Its network's tag: the group it is in (the parent's tag for the parent's own endpoints). */
  readonly group: number;
  /**
   * Its QoS (model/qos-options.ts's effectiveQos), if any: these flows take its IPv4 to the gateway ahead of
   * qos-flows.ts's, so they meter (with the meter qos-flows.ts installed, its meterId of the
   * port: apply the endpoint's QoS first) and mark it too.
   */
  readonly qos?: Qos;
}

export interface GroupPlan {
  readonly parentTag: number;
  readonly gateway: { readonly ofport: number; readonly mac: string; readonly address: string };
  /** The parent's IPv4 subnet (CIDR), shared by its groups. */
  readonly subnet: string;
  /** Every group's tag, the parent's included: a group reaches itself through the gateway too. */
  readonly groups: readonly number[];
  readonly members: readonly GroupMember[];
  readonly allows: readonly GroupAllow[];
}

/** The proxy ARP reply: the request turned around, with `mac` as the asked address's. */
function arpReply(mac: string): string {
  return [
    'move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]',
    `set_field:${mac}->eth_src`,
    'load:0x2->NXM_OF_ARP_OP[]',
    'move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[]',
    `set_field:${mac}->arp_sha`,
    'move:NXM_OF_ARP_TPA[]->NXM_NX_REG2[]',
    'move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[]',
    'move:NXM_NX_REG2[]->NXM_OF_ARP_SPA[]',
    'IN_PORT',
  ].join(',');
}

/** Every flow of a parent and its groups. Pure. */
export function groupFlows(plan: GroupPlan): string[] {
  const { parentTag: p, gateway: gw } = plan;
  const cookie = `cookie=${groupCookie(p)}`;
  const at = (table: number, priority: number) => `${cookie},table=${table},priority=${priority},reg7=${p}`;
  const head = `${cookie},priority=${PRIORITY}`;
  const mark = (m: GroupMember) => `load:${m.group}->NXM_NX_REG6[],load:${p}->NXM_NX_REG7[]`;
  const qos = (m: GroupMember) =>
    (m.qos?.rateKbps === undefined ? '' : `meter:${meterId(m.ofport)},`) +
    (m.qos?.dscp === undefined ? '' : `set_field:${m.qos.dscp}->ip_dscp,`);
  // The gateway routes between groups out of the port it came in by: its ICMP redirects ("send
  // to the neighbour directly") would point a member past the rules; they stay on the bridge.
  const flows: string[] = [`${cookie},priority=${PRIORITY + 1},in_port=${gw.ofport},icmp,icmp_type=5,actions=drop`];
  for (const m of plan.members) {
    flows.push(
      `${head},in_port=${m.ofport},arp,arp_op=1,actions=${mark(m)},resubmit(,${ARP_TABLE})`,
      `${head},in_port=${m.ofport},arp,dl_dst=${gw.mac},actions=output:${gw.ofport}`,
      `${head},in_port=${m.ofport},ip,dl_dst=${gw.mac},actions=${qos(m)}${mark(m)},ct(zone=${p},table=${TO_GATEWAY_TABLE})`,
      `${head},in_port=${gw.ofport},arp,arp_op=1,arp_tpa=${m.address},actions=output:${m.ofport}`,
      `${head},in_port=${gw.ofport},arp,dl_dst=${m.mac},actions=output:${m.ofport}`,
      `${head},in_port=${gw.ofport},ip,dl_dst=${m.mac},actions=${mark(m)},load:${m.ofport}->NXM_NX_REG5[],ct(zone=${p},table=${TO_MEMBER_TABLE})`,
      `${at(ARP_TABLE, 20)},reg6=${m.group},arp,arp_tpa=${m.address},actions=NORMAL`,
    );
  }
  flows.push(
    `${at(ARP_TABLE, 10)},arp,arp_tpa=${plan.subnet},actions=${arpReply(gw.mac)}`,
    `${at(ARP_TABLE, 1)},actions=NORMAL`,
    `${at(TO_GATEWAY_TABLE, 10)},ct_state=+new+trk,ip,actions=ct(commit,zone=${p},exec(move:NXM_NX_REG6[]->NXM_NX_CT_MARK[])),output:${gw.ofport}`,
    `${at(TO_GATEWAY_TABLE, 10)},ct_state=+est+trk,ip,actions=output:${gw.ofport}`,
    `${at(TO_GATEWAY_TABLE, 10)},ct_state=+rel+trk,ip,actions=output:${gw.ofport}`,
    `${at(TO_GATEWAY_TABLE, 1)},actions=drop`,
    `${at(TO_MEMBER_TABLE, 30)},ct_state=+est+trk,ip,actions=output:NXM_NX_REG5[]`,
    `${at(TO_MEMBER_TABLE, 30)},ct_state=+rel+trk,ip,actions=output:NXM_NX_REG5[]`,
    `${at(TO_MEMBER_TABLE, 20)},ct_state=+new+trk,ct_mark=0,ip,actions=ct(commit,zone=${p}),output:NXM_NX_REG5[]`,
  );
  const pass = `actions=output:NXM_NX_REG5[]`;
  for (const g of plan.groups) flows.push(`${at(TO_MEMBER_TABLE, 20)},ct_state=+new+trk,reg6=${g},ct_mark=${g},ip,${pass}`);
  for (const a of plan.allows) {
    const match = a.port === undefined ? 'ip' : `${a.port.proto},tp_dst=${a.port.number}`;
    flows.push(`${at(TO_MEMBER_TABLE, 20)},ct_state=+new+trk,reg6=${a.to},ct_mark=${a.from},${match},${pass}`);
  }
  flows.push(`${at(TO_MEMBER_TABLE, 1)},actions=drop`);
  return flows;
}

export class GroupFlows {
  private readonly sync: FlowSync;

  constructor(private readonly of: OpenFlow = new OpenFlow()) {
    this.sync = new FlowSync(of);
  }

  /**
   * Makes the bridge hold exactly `plan`'s flows for its parent, in one OpenFlow bundle: flows
   * that stay are left alone, new and changed ones added, those of members gone and allows
   * dropped deleted, all at once. Idempotent; remove() undoes it.
   */
  async apply(bridge: string, plan: GroupPlan): Promise<void> {
    await this.sync.sync(bridge, groupScope(plan.parentTag), { flows: groupFlows(plan) });
  }

  /** Removes every flow of the parent and its groups. Idempotent: none left is done. */
  async remove(bridge: string, parentTag: number): Promise<void> {
    await this.of.ofctl(['del-flows', bridge, scopeArg(groupScope(parentTag))], { of13: true });
  }

  /** A host link's MAC address (the parent's gateway port, whose MAC the plan answers ARP with). A read. */
  async mac(link: string): Promise<string> {
    try {
      return (await readFile(`/sys/class/net/${link}/address`, 'utf8')).trim();
    } catch (err) {
      throw new OvsnetError('OVS_FAILED', `cannot read the MAC address of ${link} (${messageOf(err)}): does the gateway port exist?`);
    }
  }
}
