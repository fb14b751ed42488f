/**
 * Endpoint groups across hosts: the flows that take a parent's groups over its VXLAN segment
 * when the parent is a logical network. Within one host nothing changes (group-flows.ts). A
 * member's traffic to a member on another host is routed by the bridge itself, never by the
 * host's kernel, so each connection has one path both ways and both hosts' conntrack sees it
 * whole:
 *
 * - On the sender's host, a packet to the gateway's MAC whose destination is a remote member
 *   (table 43, above the gateway's own rules) has the receiver's group put in reg4 and goes to
 *   table 44: a new connection passes only if the receiver's group allows the sender's (the
 *   allow is the receiver's network's, as its host's records say), and is committed with the
 *   sender's group in ct_mark, as a connection through the gateway is; established and related
 *   packets pass. Table 45 then routes it: the parent's router MAC as source, the member's MAC
 *   as destination, out of the tunnel to the member's host, on the parent's VNI.
 * - On the receiver's host, a routed packet (from a tunnel of the parent's VNI, from the router
 *   MAC) to a member's MAC is delivered through table 42 like one from the gateway: a new
 *   connection is committed there as from outside the groups (its sender's host checked it), so
 *   the member's replies, routed back the same way, are established on both hosts.
 * - Nothing else from the tunnels reaches a member: no other frame to a member's MAC, no ARP or
 *   Neighbor Discovery across hosts (each host answers its members' for the whole subnet with
 *   the gateway's MAC, so every remote address is routed). A member sending with the router MAC
 *   as its source is dropped at its port, so only the bridge's routing can use it.
 *
 * Policy is therefore decided on the sender's host, with the receiver's rules, where the
 * sender's group is known for certain; a host trusts what its peers route to it, as it trusts
 * their tunnels. Pure.
 */
import { PRIORITY, TO_GATEWAY_TABLE, TO_MEMBER_TABLE, type RemotePlan } from './group-tables.js';

export type { RemoteMember, RemotePart, RemotePlan } from './group-tables.js';

/** Remote members' connections: the allow check (44) and the routing (45). */
export const REMOTE_TABLE = 44;
export const ROUTE_TABLE = 45;

/** The router MAC of a logical parent: locally administered, 02:0f:00 and the VNI. */
export function routerMac(vni: number): string {
  const hex = vni.toString(16).padStart(6, '0');
  return `02:0f:00:${hex.slice(0, 2)}:${hex.slice(2, 4)}:${hex.slice(4, 6)}`;
}

interface Parts {
  readonly at: (table: number, priority: number) => string;
  readonly head: string;
  readonly parentTag: number;
  /** This host's members: their ports, MACs, groups (for delivery and the router MAC's guard). */
  readonly locals: readonly { readonly ofport: number; readonly mac: string; readonly group: number; readonly v6: boolean }[];
}

/** The flows of `remote` for a parent of this host. */
export function remoteFlows(remote: RemotePlan, { at, head, parentTag: p, locals }: Parts): string[] {
  const router = remote.routerMac;
  const fromTunnel = `${head},tun_id=${remote.vni}`;
  const flows: string[] = [
    `${fromTunnel},arp,actions=drop`,
    `${fromTunnel},icmp6,icmp_type=135,actions=drop`,
    `${fromTunnel},icmp6,icmp_type=136,actions=drop`,
  ];
  const guard = head.replace(`priority=${PRIORITY}`, `priority=${PRIORITY + 2}`);
  const otherwise = head.replace(`priority=${PRIORITY}`, `priority=${PRIORITY - 1}`);
  for (const m of locals) {
    const mark = `load:${m.group}->NXM_NX_REG6[],load:${p}->NXM_NX_REG7[],load:${m.ofport}->NXM_NX_REG5[]`;
    flows.push(
      `${guard},in_port=${m.ofport},dl_src=${router},actions=drop`,
      `${fromTunnel},dl_src=${router},dl_dst=${m.mac},ip,actions=${mark},ct(zone=${p},table=${TO_MEMBER_TABLE})`,
      `${otherwise},tun_id=${remote.vni},dl_dst=${m.mac},actions=drop`,
    );
    if (m.v6) flows.push(`${fromTunnel},dl_src=${router},dl_dst=${m.mac},ipv6,actions=${mark},ct(zone=${p},table=${TO_MEMBER_TABLE})`);
  }
  for (const r of remote.members) {
    const route = `set_field:${router}->eth_src,set_field:${r.mac}->eth_dst,output:${r.tunnel}`;
    const toRemote = `load:${r.group}->NXM_NX_REG4[],resubmit(,${REMOTE_TABLE})`;
    if (r.address !== undefined)
      flows.push(
        `${at(TO_GATEWAY_TABLE, 20)},ip,nw_dst=${r.address},actions=${toRemote}`,
        `${at(ROUTE_TABLE, 10)},ip,nw_dst=${r.address},actions=${route}`,
      );
    if (r.address6 !== undefined)
      flows.push(
        `${at(TO_GATEWAY_TABLE, 20)},ipv6,ipv6_dst=${r.address6},actions=${toRemote}`,
        `${at(ROUTE_TABLE, 10)},ipv6,ipv6_dst=${r.address6},actions=${route}`,
      );
  }
  const routeOn = `actions=resubmit(,${ROUTE_TABLE})`;
  for (const l3 of ['ip', 'ipv6'] as const) {
    const six = l3 === 'ipv6' ? '6' : '';
    flows.push(`${at(REMOTE_TABLE, 30)},ct_state=+est+trk,${l3},${routeOn}`, `${at(REMOTE_TABLE, 30)},ct_state=+rel+trk,${l3},${routeOn}`);
    for (const a of remote.allows) {
      const match = a.port === undefined ? l3 : `${a.port.proto}${six},tp_dst=${a.port.number}`;
      flows.push(
        `${at(REMOTE_TABLE, 20)},ct_state=+new+trk,reg6=${a.from},reg4=${a.to},${match},actions=ct(commit,zone=${p},exec(move:NXM_NX_REG6[]->NXM_NX_CT_MARK[])),resubmit(,${ROUTE_TABLE})`,
      );
    }
  }
  flows.push(`${at(REMOTE_TABLE, 1)},actions=drop`, `${at(ROUTE_TABLE, 1)},actions=drop`);
  return flows;
}
