/**
 * Swarm service VIPs in the bridge: what Docker's IPVS load balancer does for the overlay driver,
 * done in OpenFlow with conntrack, as OVN's load balancers do. For each VIP of a swarm network
 * with endpoints on this host (the VIPs and their tasks' addresses come from the local Docker
 * Engine: driver/vip/):
 *
 * - ARP for the VIP is answered here with the VIP's own MAC (02:42 and the address, as every
 *   endpoint's MAC is made), from any port: the request never floods, across tunnels or not.
 * - A packet to the VIP's MAC and address goes through two conntrack zones of the network: the
 *   hairpin zone (H) first, then the VIP zone (Z). A new connection takes the VIP's select group,
 *   one bucket per task, each `ct(commit,nat(dst=TASK))`: the connection sticks to its task in
 *   conntrack, later packets are translated by it, and its replies, which come back from the task
 *   (on this host or through a tunnel) and pass zone Z by their source, get the VIP as source again.
 *   After the translation the destination MAC is the task's, made from its address.
 * - A task reaching its own service's VIP and picked itself (hairpin): its source would be its
 *   own address, which its kernel drops on the way in; so the connection is also translated to
 *   come from the VIP (zone H) and sent back out of the port it came in by.
 * - A VIP whose service has no task: its new connections are answered with ICMP port unreachable
 *   by ovsnet (the packet goes to ovsnet's OpenFlow connection, of-watch.ts, under the VIP's
 *   cookie: refusal.ts), which a TCP client sees as "connection refused", rather than silence.
 *
 * Zones: Z = 0x1000 + the network's tag, H = 0x2000 + the tag (endpoint groups use the tag itself).
 * Registers: reg9 the network's tag, reg10 the VIP. Tables 50-54 (groups use 41-43). Every flow
 * carries the network's VIP cookie (cookies.ts); groups have no cookie in OpenFlow, ovsnet's are
 * those in GROUP_BASE's range. Pure: the flows and groups for flow-sync.ts to install.
 */
import { parseAddress } from '../../lib/cidr.js';
import { cookieOf, FEATURE, hex } from '../ovs/cookies.js';
import { macFor } from '../model/addresses.js';

/** Above QoS (300) and endpoint groups (400): a VIP's packets are the VIP's before anything else. */
export const VIP_PRIORITY = 510;
/** Packets from a task's address: below the VIP's own (a task reaching a VIP is a client first). */
export const TASK_PRIORITY = 500;
export const AFTER_HAIRPIN_TABLE = 50;
export const PICK_TABLE = 51;
export const DELIVER_TABLE = 52;
export const HAIRPIN_OUT_TABLE = 53;
export const REPLY_TABLE = 54;

/** ovsnet's select groups: GROUP_BASE + 1 to GROUP_BASE + 0xffff. */
export const GROUP_BASE = 0x0f610000;
export const isVipGroup = (id: number): boolean => id > GROUP_BASE && id <= GROUP_BASE + 0xffff;

export interface VipService {
  readonly vip: string;
  /** Its tasks' addresses (IPv4, no prefix length), in any order. */
  readonly tasks: readonly string[];
}

export interface VipNetwork {
  readonly tag: number;
  readonly services: readonly VipService[];
  /** This host's endpoints of the network: their OpenFlow port and IPv4 address (no prefix length). */
  readonly local: readonly { readonly ofport: number; readonly address: string }[];
}

export interface VipState {
  readonly flows: string[];
  /** group ID -> the group as dump-groups prints it in OpenFlow 1.5, after `group_id=ID,`. */
  readonly groups: Map<number, string>;
}

export const vipCookie = (tag: number): bigint => cookieOf(FEATURE.vip, tag);
export const vipZone = (tag: number): number => 0x1000 + tag;
export const hairpinZone = (tag: number): number => 0x2000 + tag;

const hexTag = (tag: number): string => `0x${tag.toString(16)}`;
const hexOf = (address: string): string => `0x${parseAddress(address).value.toString(16)}`;

/** The destination MAC made from the destination address (02:42 + the IPv4 address), as macFor makes every endpoint's. */
const MAC_FROM_IP = 'load:0x0242->NXM_OF_ETH_DST[32..47],move:NXM_OF_IP_DST[]->NXM_OF_ETH_DST[0..31]';

/** The ARP reply for `address` with `mac`: the request turned around. */
function arpReply(address: string, mac: string): string {
  return [
    'move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]',
    `set_field:${mac}->eth_src`,
    'set_field:2->arp_op',
    'move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[]',
    `set_field:${mac}->arp_sha`,
    'move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[]',
    `set_field:${address}->arp_spa`,
    'IN_PORT',
  ].join(',');
}

/**
 * A group ID per VIP, the same from one sync to the next while the VIP lives: a hash of the
 * network's tag and the VIP in the range, the next free one on a collision (in a fixed order).
 */
export function groupIds(vips: readonly { tag: number; vip: string }[]): Map<string, number> {
  const ids = new Map<string, number>();
  const taken = new Set<number>();
  const keys = vips.map((v) => `${v.tag}/${v.vip}`).sort();
  for (const key of keys) {
    let h = 2166136261;
    for (const ch of key) h = Math.imul(h ^ ch.charCodeAt(0), 16777619) >>> 0;
    let slot = (h % 0xffff) + 1;
    while (taken.has(slot)) slot = (slot % 0xffff) + 1;
    taken.add(slot);
    ids.set(key, GROUP_BASE + slot);
  }
  return ids;
}

/** Every flow and select group for the VIPs of these networks. Pure. */
export function vipFlows(networks: readonly VipNetwork[]): VipState {
  const flows: string[] = [];
  const groups = new Map<number, string>();
  const ids = groupIds(networks.flatMap((n) => n.services.map((s) => ({ tag: n.tag, vip: s.vip }))));
  for (const n of networks) {
    if (n.services.length === 0) continue;
    const cookie = `cookie=${hex(vipCookie(n.tag))}`;
    const [z, h] = [vipZone(n.tag), hairpinZone(n.tag)];
    const at = (table: number, priority: number) => `${cookie},table=${table},priority=${priority},reg9=${n.tag}`;
    flows.push(
      `${at(AFTER_HAIRPIN_TABLE, 10)},ip,actions=ct(zone=${z},nat,table=${PICK_TABLE})`,
      `${at(PICK_TABLE, 10)},ct_state=+est+trk,ip,actions=resubmit(,${DELIVER_TABLE})`,
      `${at(PICK_TABLE, 10)},ct_state=+rel+trk,ip,actions=resubmit(,${DELIVER_TABLE})`,
      `${at(PICK_TABLE, 1)},actions=drop`,
      `${at(DELIVER_TABLE, 1)},ip,actions=${MAC_FROM_IP},NORMAL`,
      `${at(REPLY_TABLE, 1)},actions=NORMAL`,
    );
    const tasks = new Set<string>();
    for (const s of n.services) {
      const vmac = macFor(`${s.vip}/32`);
      const reg10 = `reg10=${hexOf(s.vip)}`;
      const group = ids.get(`${n.tag}/${s.vip}`) ?? 0;
      flows.push(
        `${cookie},priority=${VIP_PRIORITY},arp,arp_op=1,arp_tpa=${s.vip},actions=${arpReply(s.vip, vmac)}`,
        `${cookie},priority=${VIP_PRIORITY},ip,dl_dst=${vmac},nw_dst=${s.vip},actions=set_field:${hexTag(n.tag)}->reg9,set_field:${hexOf(s.vip)}->reg10,ct(zone=${h},nat,table=${AFTER_HAIRPIN_TABLE})`,
        `${at(HAIRPIN_OUT_TABLE, 10)},${reg10},ip,actions=set_field:${vmac}->eth_src,${MAC_FROM_IP},IN_PORT`,
        `${at(REPLY_TABLE, 10)},ct_state=+rpl+trk,ip,nw_src=${s.vip},actions=set_field:${vmac}->eth_src,NORMAL`,
      );
      const live = [...new Set(s.tasks)].sort();
      if (live.length === 0) {
        flows.push(`${at(PICK_TABLE, 20)},${reg10},ct_state=+new+trk,ip,actions=controller`);
      } else {
        flows.push(`${at(PICK_TABLE, 20)},${reg10},ct_state=+new+trk,ip,actions=group:${group}`);
        const buckets = live.map((task, i) => `bucket=bucket_id:${i},actions=ct(commit,table=${DELIVER_TABLE},zone=${z},nat(dst=${task}))`);
        groups.set(group, `type=select,${buckets.join(',')}`);
      }
      for (const task of live) tasks.add(task);
      // Hairpin: this host's task reaching its own service's VIP, and picked.
      for (const x of n.local.filter((l) => live.includes(l.address))) {
        const self = `${at(DELIVER_TABLE, 20)},${reg10},in_port=${x.ofport},ip,nw_dst=${x.address}`;
        flows.push(
          `${self},ct_state=-rpl+trk,actions=ct(commit,zone=${h},nat(src=${s.vip}),table=${HAIRPIN_OUT_TABLE})`,
          `${self},ct_state=+rpl+trk,actions=set_field:${vmac}->eth_src,${MAC_FROM_IP},IN_PORT`,
        );
      }
    }
    for (const task of [...tasks].sort()) {
      flows.push(
        `${cookie},priority=${TASK_PRIORITY},ip,nw_src=${task},actions=set_field:${hexTag(n.tag)}->reg9,ct(zone=${z},nat,table=${REPLY_TABLE})`,
      );
    }
  }
  return { flows, groups };
}
