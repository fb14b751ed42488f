/**
 * Endpoint groups on the bridge: the OpenFlow rules that make a parent network's groups one
 * subnet split at layer 2, with traffic between groups going through the parent's gateway and
 * dropped unless the receiving group allows the sender. Members sit on access ports of their
 * group's tag, the gateway on the parent's; proxy ARP (table 41), conntrack with the sender's
 * group in ct_mark (tables 43, then 42 for the allow check) do the rest: docs/endpoint-groups.md,
 * "The flows", walks through them. Conntrack and registers work on both datapaths (userspace
 * conntrack since OVS 2.6). The parent is a group of its own (its tag is its group). Every flow
 * carries the parent's cookie (groupCookie): GroupFlows.apply swaps a plan for the next one in
 * one OpenFlow bundle (flow-sync.ts). A dual-stack parent's groups work on IPv6 the same way,
 * Neighbor Discovery taking ARP's place (group-flows6.ts).
 */
import { readFile } from 'node:fs/promises';
import { messageOf, OvsnetError } from '../../../lib/errors.js';
import { FEATURE, cookieOf, hex, scopeArg, type CookieScope } from '../cookies.js';
import { FlowSync } from '../flow-sync.js';
import { OpenFlow } from '../openflow.js';
import { meterId } from '../qos-flows.js';
import { groupFlows6 } from './group-flows6.js';
import { remoteFlows } from './group-remote.js';
import {
  ARP_TABLE,
  PRIORITY,
  TO_GATEWAY_TABLE,
  TO_MEMBER_TABLE,
  conntrackFlows,
  type GroupMember,
  type GroupPlan,
} from './group-tables.js';

export { ARP_TABLE, TO_GATEWAY_TABLE, TO_MEMBER_TABLE, type GroupMember, type GroupPlan } from './group-tables.js';

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
    `${at(TO_GATEWAY_TABLE, 1)},actions=drop`,
    ...conntrackFlows(plan, at, 'ip'),
  );
  flows.push(...groupFlows6(plan, { at, head, mark, qos }), `${at(TO_MEMBER_TABLE, 1)},actions=drop`);
  if (plan.remote !== undefined) {
    const locals = plan.members.map((m) => ({ ofport: m.ofport, mac: m.mac, group: m.group, v6: m.address6 !== undefined }));
    flows.push(...remoteFlows(plan.remote, { at, head, parentTag: p, locals }));
  }
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
