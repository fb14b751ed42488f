/**
 * Which VXLAN tunnels a host wants, as pure functions of its networks, the logical networks'
 * members and the live hosts: all of them (the full sync's diff against OVS's ports) or those to
 * one peer (what a peer's registration or member key changes, tunnels.ts's incremental sync).
 * Both come from tunnelTo, so the two paths cannot disagree on what a tunnel is.
 */
import { createHash } from 'node:crypto';
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

/** Names made so far (a full sync names every tunnel again: one SHA-1 per peer each time). */
const names = new Map<string, string>();

/** `ovx` + the VNI in hex + 6 hex of the peer's name: 15 characters, unique per (VNI, peer). */
export function tunnelName(vni: number, peer: string): string {
  const key = `${vni}/${peer}`;
  let name = names.get(key);
  if (name === undefined) {
    if (names.size >= 100_000) names.clear(); // bounded: peers come and go
    name = `ovx${vni.toString(16).padStart(6, '0')}${createHash('sha1').update(peer).digest('hex').slice(0, 6)}`;
    names.set(key, name);
  }
  return name;
}

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
  if (members === undefined || !Object.hasOwn(members, peer) || host === undefined || host.vtepIp === '') return undefined;
  return { name: tunnelName(n.vni, peer), bridge: n.bridge, tag: n.tag, vni: n.vni, peer, remoteIp: host.vtepIp };
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
