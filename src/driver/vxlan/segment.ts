/**
 * A new network's first step after its options: its place among logical networks. With
 * -o ovsnet.network=NAME it joins NAME (taking NAME's VNI, or with -o ovsnet.encap=vlan NAME's
 * VLAN tag on the uplink) and its subnets become NAME's pools in ovsnet's IPAM, so that
 * addresses are unique across hosts; without, none of its subnets may belong to a logical
 * network (a one-host network would hand out addresses NAME's hosts use).
 */
import { OvsnetError } from '../../lib/errors.js';
import type { DriverDeps } from '../effects/deps.js';
import type { NetworkOptions } from '../model/options.js';
import type { Undo } from '../model/undo.js';
import type { Segment } from '../model/records.js';
import { joinLogical, leaveLogical } from './logical.js';

const DEFAULT_MTU = 1500;
/** Outer IPv4 (20) + UDP (8) + VXLAN (8) + inner Ethernet (14) headers. */
const VXLAN_OVERHEAD = 50;

export type SegmentDeps = Pick<DriverDeps, 'store' | 'host' | 'vtepIp' | 'pools' | 'uplink'>;

export interface SegmentRequest {
  readonly networkId: string;
  readonly opts: NetworkOptions;
  /** The network's subnets, IPv4 then IPv6. */
  readonly subnets: readonly string[];
  readonly now: () => Date;
  /** Whether this host's member with another NetworkID is a leftover (joinLogical's isLeftover). */
  readonly isLeftover: (networkId: string) => Promise<boolean>;
  /** A swarm network (swarm.ts): allocated by a manager already; its addresses are the swarm's. */
  readonly swarm?: boolean;
  /** The VLAN tags this host's networks hold (a cluster VLAN tag must be free here too). */
  readonly localTags: () => Promise<ReadonlySet<number>>;
}

/**
 * Joins the logical network the options name, queueing the undo (leaving it); returns its VNI or
 * VLAN tag, or neither for a one-host VLAN network.
 */
export async function joinSegment(deps: SegmentDeps, req: SegmentRequest, undo: Undo[]): Promise<Segment> {
  const name = req.opts.logical;
  if (name === undefined) {
    // A group of a logical network shares its parent's pool, on this host's segment of its own.
    for (const s of req.opts.group === undefined ? req.subnets : []) {
      const other = deps.pools?.logicalOf(s);
      if (other !== undefined) {
        throw new OvsnetError(
          'LOGICAL_NETWORK_MISMATCH',
          `subnet ${s} belongs to logical network ${other}: add -o ovsnet.network=${other} -o ovsnet.encap=vxlan to join it, or choose another subnet`,
        );
      }
    }
    return {};
  }
  const encap = req.opts.encap;
  if (encap === 'vlan' && (deps.uplink === undefined || deps.uplink.name === '')) {
    throw new OvsnetError(
      'LOGICAL_NETWORK_INVALID',
      `logical network ${name} with -o ovsnet.encap=vlan goes onto the physical network through an uplink, and this host has none: set OVSNET_UPLINK to the interface cabled to the switch's trunk port, or use -o ovsnet.encap=vxlan (a tunnel)`,
    );
  }
  if (encap === 'vlan') checkUplinkMtu(name, req.opts.mtu, deps.uplink);
  if (encap === 'vxlan' && deps.vtepIp === '') {
    throw new OvsnetError(
      'LOGICAL_NETWORK_INVALID',
      `logical network ${name} needs this host's tunnel address, and none was found (no default route): set OVSNET_VTEP_IP to the address other hosts reach this one at`,
    );
  }
  const { store, host } = deps;
  const logical = await joinLogical(store, {
    name,
    encap,
    vni: req.opts.tag,
    ...(encap === 'vlan' ? { localTags: await req.localTags() } : {}),
    subnets: req.subnets,
    internal: req.opts.internal,
    icc: req.opts.icc,
    host,
    networkId: req.networkId,
    now: req.now(),
    isLeftover: req.isLeftover,
    ...(req.swarm === true ? { swarm: true } : {}),
  });
  undo.push(() => leaveLogical(store, name, host, req.networkId));
  // The swarm manager hands out a swarm network's addresses itself, unique across the swarm.
  if (req.swarm === true) return { vni: logical.vni };
  for (const s of req.subnets) {
    if ((await deps.pools?.bindLogical(s, name)) === undefined) {
      throw new OvsnetError(
        'LOGICAL_NETWORK_INVALID',
        `logical network ${name} needs ovsnet's IPAM for subnet ${s}, so that addresses are unique across hosts: create it with --ipam-driver ovsnet`,
      );
    }
  }
  return encap === 'vxlan' ? { vni: logical.vni } : { vlan: logical.vni };
}

/** A VLAN network needs its uplink attached (its MTU known), and fits in the uplink's MTU. */
function checkUplinkMtu(name: string, asked: number | undefined, uplink: SegmentDeps['uplink']): void {
  const mtu = uplink?.mtu();
  if (mtu === undefined) {
    throw new OvsnetError(
      'NOT_READY',
      `logical network ${name} needs the uplink ${uplink?.name ?? ''}, not attached yet (ovsnet is starting): retry`,
    );
  }
  if (asked !== undefined && asked > mtu) {
    throw new OvsnetError(
      'LOGICAL_NETWORK_INVALID',
      `-o com.docker.network.driver.mtu=${asked} is more than the uplink ${uplink?.name ?? ''} carries (MTU ${mtu}): pass at most ${mtu}, or omit it`,
    );
  }
}

/**
 * The MTU asked for; else a VXLAN network's fits in the tunnel interface's, a VLAN network on
 * the uplink has the uplink's (no tunnel: no overhead), a one-host one's is 1500.
 */
export function segmentMtu(asked: number | undefined, segment: Segment, deps: Pick<DriverDeps, 'tunnelMtu' | 'uplink'>): number {
  if (asked !== undefined) return asked;
  if (segment.vni !== undefined) return (deps.tunnelMtu?.() ?? DEFAULT_MTU) - VXLAN_OVERHEAD;
  if (segment.vlan !== undefined) return deps.uplink?.mtu() ?? DEFAULT_MTU;
  return DEFAULT_MTU;
}
