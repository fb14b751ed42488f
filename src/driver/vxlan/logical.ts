/**
 * Logical networks: one network across hosts. Each host's `docker network create
 * -o ovsnet.network=NAME -o ovsnet.encap=vxlan` makes that host's NetworkID a member of NAME's
 * record in the shared store (Docker outside swarm keeps a network per host, with its own ID).
 * The first host creates the record and its VNI (claimed once for the cluster, like a VLAN tag);
 * the others must agree with it on subnets, encapsulation, --internal, enable_icc and any VNI
 * asked for. The record is one key changed by compare-and-swap, each member a small key of its
 * own (records/logical-records.ts says how the two stay coherent); the last member to leave
 * deletes the record and frees the VNI.
 * With -o ovsnet.encap=vlan instead, the network goes onto the physical network through each
 * host's uplink (uplink/uplink.ts): the record holds its VLAN tag, claimed for the cluster in the
 * same way, and every member uses that tag on its bridge.
 */
import { OvsnetError } from '../../lib/errors.js';
import type { Store } from '../../store/types.js';
import { MAX_VNI } from '../model/options.js';
import type { Encap, LogicalMember, LogicalNetwork } from '../model/records.js';
import {
  addMember,
  clusterIds,
  createLogical,
  deleteIfEmpty,
  readLogical,
  removeMember,
  replaceLogical,
} from '../records/logical-records.js';

export interface JoinRequest {
  readonly name: string;
  /** vxlan unless said. */
  readonly encap?: Encap;
  /** The VNI or VLAN tag asked for. */
  readonly vni: number | undefined;
  /** VLAN tags this host's networks hold (vlan: a new network's tag must be free here too). */
  readonly localTags?: ReadonlySet<number>;
  readonly subnets: readonly string[];
  readonly internal: boolean;
  /** enable_icc (true unless false was asked for): every host's network must say the same. */
  readonly icc?: boolean;
  readonly host: string;
  readonly networkId: string;
  readonly now: Date;
  /**
   * Whether this host's member with another NetworkID is a leftover (a create that failed after
   * joining, or whose answer was lost): then the new network takes its place.
   */
  readonly isLeftover?: (networkId: string) => Promise<boolean>;
  /** A swarm network's node: the record must exist already (the manager allocated it). */
  readonly swarm?: boolean;
}

const MAX_RETRIES = 32;
const MAX_VLAN = 4094;

/** What the wire ID is called. */
const idName = (encap: Encap) => (encap === 'vxlan' ? 'VNI' : 'VLAN tag');

function describeLogical(n: LogicalNetwork): string {
  const subnets = n.subnets.length === 0 ? 'no subnet' : `subnet ${n.subnets.join(', ')}`;
  return `logical network ${n.name} is ${n.encap} ${idName(n.encap)} ${n.vni} with ${subnets}${n.internal ? ', --internal' : ''}${n.icc === false ? ', enable_icc=false' : ''} (created on host ${n.createdBy} at ${n.createdAt})`;
}

/** What differs between an existing logical network and a request to join it; '' if nothing. */
function mismatch(n: LogicalNetwork, req: JoinRequest): string {
  const encap = req.encap ?? 'vxlan';
  if (encap !== n.encap) return `this request asks for -o ovsnet.encap=${encap}: pass -o ovsnet.encap=${n.encap}`;
  const wanted = [...req.subnets].sort().join(', ');
  if ([...n.subnets].sort().join(', ') !== wanted)
    return `this request has ${wanted === '' ? 'no subnet' : `subnet ${wanted}`}: pass --subnet ${n.subnets.join(' --subnet ')}`;
  if (req.vni !== undefined && req.vni !== n.vni)
    return `this request asks for ${idName(n.encap)} ${req.vni}: omit -o ovsnet.tag or pass ${n.vni}`;
  if (req.internal !== n.internal && n.swarm !== true)
    return `this request is ${req.internal ? '' : 'not '}--internal: ${n.internal ? 'add' : 'drop'} --internal`;
  if ((req.icc ?? true) !== (n.icc ?? true))
    return `this request has enable_icc=${String(req.icc ?? true)}: ${n.icc === false ? 'pass' : 'drop'} -o com.docker.network.bridge.enable_icc=false`;
  return '';
}

/** A swarm network this store holds no allocation of (or a freed one). */
function notAllocated(name: string): OvsnetError {
  return new OvsnetError(
    'SWARM_NOT_ALLOCATED',
    `swarm network ${name.replace(/^swarm-/, '')} has no allocation in ovsnet's store (never allocated, or removed): every node's ovsnet must share the managers' OVSNET_STORE=etcd://... and have OVSNET_SCOPE=global`,
  );
}

/** Makes `req.networkId` this host's member of the logical network, creating it if new. */
export async function joinLogical(store: Store, req: JoinRequest): Promise<LogicalNetwork> {
  const encap = req.encap ?? 'vxlan';
  for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
    const read = await readLogical(store, req.name);
    const member: LogicalMember = { networkId: req.networkId, since: req.now.toISOString() };
    if (read === undefined || (req.swarm === true && read.record.freedAt !== undefined)) {
      if (req.swarm === true) throw notAllocated(req.name);
      const vni = req.vni ?? (await freeId(store, encap, req.localTags ?? new Set()));
      const record: LogicalNetwork = {
        name: req.name,
        encap,
        vni,
        subnets: req.subnets,
        internal: req.internal,
        ...(req.icc === false ? { icc: false as const } : {}),
        members: { [req.host]: member },
        createdBy: req.host,
        createdAt: req.now.toISOString(),
      };
      const { created, holder } = await createLogical(store, record);
      if (created) return record;
      if (req.vni !== undefined && holder !== undefined && holder !== req.name) {
        throw new OvsnetError(
          'TAG_TAKEN',
          `${idName(encap)} ${vni} is used by logical network ${holder}: pick another from 1 to ${encap === 'vxlan' ? MAX_VNI : MAX_VLAN}, or omit -o ovsnet.tag`,
        );
      }
      continue;
    }
    const current = read.record;
    // Members still inside the record (a layout-1 daemon's): to keys of their own first.
    if (read.inRecord.length > 0) {
      await replaceLogical(store, read, current);
      continue;
    }
    const why = mismatch(current, req);
    if (why !== '') throw new OvsnetError('LOGICAL_NETWORK_MISMATCH', `${describeLogical(current)}; ${why}`);
    const mine = current.members[req.host];
    if (mine?.networkId === req.networkId) return current;
    if (mine !== undefined && !(await req.isLeftover?.(mine.networkId))) {
      throw new OvsnetError(
        'LOGICAL_NETWORK_MISMATCH',
        `this host already takes part in logical network ${req.name} with network ${mine.networkId.slice(0, 12)}: one Docker network per host joins it; use that one`,
      );
    }
    if (await addMember(store, read, req.host, member)) {
      const { closing: _closing, ...open } = current;
      return { ...open, members: { ...current.members, [req.host]: member } };
    }
  }
  throw new OvsnetError('NOT_READY', `logical network ${req.name} is changing too fast on other hosts; retry`);
}

/** Removes the host's member; the last member deletes the network and frees its VNI. */
export async function leaveLogical(store: Store, name: string, host: string, networkId: string | undefined): Promise<void> {
  for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
    const read = await readLogical(store, name);
    if (read === undefined) return;
    const current = read.record;
    const mine = current.members[host];
    if (mine === undefined || (networkId !== undefined && mine.networkId !== networkId)) return;
    if (read.inRecord.length > 0) {
      await replaceLogical(store, read, current); // a layout-1 daemon's members, to keys first
      continue;
    }
    const other = Object.keys(current.members).find((h) => h !== host);
    // A swarm network stays allocated with no member until FreeNetwork (swarm.ts).
    const kept = current.swarm === true && current.freedAt === undefined;
    if (other !== undefined || kept) {
      if (await removeMember(store, read, host, other)) return;
    } else if ((await deleteIfEmpty(store, read, host)) === 'deleted') return;
  }
  throw new OvsnetError('NOT_READY', `logical network ${name} is changing too fast on other hosts; retry`);
}

/** The lowest VNI (VLAN tag) no logical network holds (and, for a VLAN, no network of this host). */
export async function freeId(store: Store, encap: Encap, localTags: ReadonlySet<number>): Promise<number> {
  const used = await clusterIds(store, encap);
  if (encap === 'vlan') for (const t of localTags) used.add(t);
  let id = 1;
  while (used.has(id)) id++;
  const max = encap === 'vxlan' ? MAX_VNI : MAX_VLAN;
  if (id > max) throw new OvsnetError('TAGS_EXHAUSTED', `all ${max} ${idName(encap)}s are in use: remove a logical network first`);
  return id;
}
