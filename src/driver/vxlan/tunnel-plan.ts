/**
 * Which VXLAN tunnels a host wants, as pure functions of its networks, the logical networks'
 * members and the live hosts: all of them (the full sync's diff against OVS's ports) or those to
 * one peer (what a peer's registration or member key changes, tunnels.ts's incremental sync).
 * Both come from tunnelTo, so the two paths cannot disagree on what a tunnel is.
 */
import type { HostRecord } from '../../cluster/hosts.js';
import type { LogicalNetwork, NetworkRecord } from '../model/records.js';

export interface Tunnel {
  readonly name: string;
  readonly bridge: string;
  readonly tag: number;
  readonly vni: number;
  readonly peer: string;
  readonly remoteIp: string;
}

/**
 * `ovx` + the VNI in 6 hex digits + the peer's tunnel address (IPv4, OVSNET_VTEP_IP's form) as
 * a 32-bit number in 6 base-62 digits: 15 characters, the most a port name may have. The name
 * is what OVS tells a tunnel by (its key and remote_ip), written out whole: two tunnels of one
 * host never share a name. (Six hex digits of a hash of the peer's name collided at 1,000 peers
 * in one VNI about 3% of the time, and two peers then took turns holding one port.) Undefined
 * when `remoteIp` is not an IPv4 address: no tunnel can go there from an IPv4 VTEP.
 */
export function tunnelName(vni: number, remoteIp: string): string | undefined {
  const m = IPV4.exec(remoteIp);
  if (m === null) return undefined;
  let n = m.slice(1).reduce((a, o) => a * 256 + Number(o), 0);
  let ip = '';
  for (let i = 0; i < 6; i++, n = Math.floor(n / 62)) ip = BASE62.charAt(n % 62) + ip;
  return `ovx${vni.toString(16).padStart(6, '0')}${ip}`;
}

/** OVSNET_VTEP_IP's octets (config.ts). */
const OCTET = '(25[0-5]|2[0-4]\\d|1?\\d?\\d)';
const IPV4 = new RegExp(`^${OCTET}\\.${OCTET}\\.${OCTET}\\.${OCTET}$`);
const BASE62 = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';

/** The tunnel of network `n` to `peer`, if `peer` is a live member of n's logical network other than `self`. */
function tunnelTo(
  self: string,
  peer: string,
  n: NetworkRecord,
  logical: ReadonlyMap<string, LogicalNetwork>,
  hosts: ReadonlyMap<string, HostRecord>,
): Tunnel | undefined {
  if (n.logical === undefined || n.vni === undefined || peer === self) return undefined;
  const members = logical.get(n.logical)?.members;
  const host = hosts.get(peer);
  // Object.hasOwn: a peer named "constructor" is no member of every network.
  if (members === undefined || !Object.hasOwn(members, peer) || host === undefined) return undefined;
  const name = tunnelName(n.vni, host.vtepIp);
  if (name === undefined) return undefined; // no address (''), or not one an IPv4 VTEP reaches
  return { name, bridge: n.bridge, tag: n.tag, vni: n.vni, peer, remoteIp: host.vtepIp };
}

/** The tunnels this host should have, by peer. Pure. */
export function wantedTunnels(
  self: string,
  networks: readonly NetworkRecord[],
  logical: ReadonlyMap<string, LogicalNetwork>,
  hosts: ReadonlyMap<string, HostRecord>,
): Tunnel[] {
  const peers = new Set<string>();
  for (const n of networks)
    for (const peer of Object.keys((n.logical === undefined ? undefined : logical.get(n.logical)?.members) ?? {})) peers.add(peer);
  return [...peers].sort().flatMap((peer) => wantedTunnelsTo(self, peer, networks, logical, hosts));
}

/** The tunnels this host should have to one peer (one per logical network they share). Pure. */
export function wantedTunnelsTo(
  self: string,
  peer: string,
  networks: readonly NetworkRecord[],
  logical: ReadonlyMap<string, LogicalNetwork>,
  hosts: ReadonlyMap<string, HostRecord>,
): Tunnel[] {
  const out: Tunnel[] = [];
  for (const n of networks) {
    const t = tunnelTo(self, peer, n, logical, hosts);
    if (t !== undefined) out.push(t);
  }
  return out;
}

/** Whether two tunnels are the same port (a VTEP address or VLAN tag changed: not). */
export function sameTunnel(a: Tunnel, b: Tunnel): boolean {
  return a.name === b.name && a.remoteIp === b.remoteIp && a.tag === b.tag && a.bridge === b.bridge;
}
