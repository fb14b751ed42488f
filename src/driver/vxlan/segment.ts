/**
 * A new network's first step after its options: its place among logical networks. With
 * -o ovsnet.network=NAME it joins NAME (taking NAME's VNI) and its subnets become NAME's pools in
 * ovsnet's IPAM, so that addresses are unique across hosts; without, none of its subnets may
 * belong to a logical network (a one-host network would hand out addresses NAME's hosts use).
 */
import { OvsnetError } from '../../errors.js';
import type { DriverDeps } from '../deps.js';
import type { NetworkOptions } from '../options.js';
import type { Undo } from '../undo.js';
import { joinLogical, leaveLogical } from './logical.js';

const DEFAULT_MTU = 1500;
/** Outer IPv4 (20) + UDP (8) + VXLAN (8) + inner Ethernet (14) headers. */
const VXLAN_OVERHEAD = 50;

export type SegmentDeps = Pick<DriverDeps, 'store' | 'host' | 'vtepIp' | 'pools'>;

export interface SegmentRequest {
  readonly networkId: string;
  readonly opts: NetworkOptions;
  /** The network's subnets, IPv4 then IPv6. */
  readonly subnets: readonly string[];
  readonly now: () => Date;
  /** Whether this host's member with another NetworkID is a leftover (joinLogical's isLeftover). */
  readonly isLeftover: (networkId: string) => Promise<boolean>;
}

/**
 * Joins the logical network the options name, queueing the undo (leaving it); returns its VNI,
 * or undefined for a one-host VLAN network.
 */
export async function joinSegment(deps: SegmentDeps, req: SegmentRequest, undo: Undo[]): Promise<number | undefined> {
  const name = req.opts.logical;
  if (name === undefined) {
    for (const s of req.subnets) {
      const other = deps.pools?.logicalOf(s);
      if (other !== undefined) {
        throw new OvsnetError(
          'LOGICAL_NETWORK_MISMATCH',
          `subnet ${s} belongs to logical network ${other}: add -o ovsnet.network=${other} -o ovsnet.encap=vxlan to join it, or choose another subnet`,
        );
      }
    }
    return undefined;
  }
  if (deps.vtepIp === '') {
    throw new OvsnetError(
      'LOGICAL_NETWORK_INVALID',
      `logical network ${name} needs this host's tunnel address, and none was found (no default route): set OVSNET_VTEP_IP to the address other hosts reach this one at`,
    );
  }
  const { store, host } = deps;
  const logical = await joinLogical(store, {
    name,
    vni: req.opts.tag,
    subnets: req.subnets,
    internal: req.opts.internal,
    host,
    networkId: req.networkId,
    now: req.now(),
    isLeftover: req.isLeftover,
  });
  undo.push(() => leaveLogical(store, name, host, req.networkId));
  for (const s of req.subnets) {
    if ((await deps.pools?.bindLogical(s, name)) === undefined) {
      throw new OvsnetError(
        'LOGICAL_NETWORK_INVALID',
        `logical network ${name} needs ovsnet's IPAM for subnet ${s}, so that addresses are unique across hosts: create it with --ipam-driver ovsnet`,
      );
    }
  }
  return logical.vni;
}

/** The MTU asked for; else a VXLAN network's fits in the tunnel interface's, a VLAN one's is 1500. */
export function segmentMtu(asked: number | undefined, vni: number | undefined, tunnelMtu: (() => number | undefined) | undefined): number {
  return asked ?? (vni === undefined ? DEFAULT_MTU : (tunnelMtu?.() ?? DEFAULT_MTU) - VXLAN_OVERHEAD);
}
