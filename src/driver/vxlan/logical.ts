/**
 * Logical networks: one network across hosts. Each host's `docker network create
 * -o ovsnet.network=NAME -o ovsnet.encap=vxlan` makes that host's NetworkID a member of NAME's
 * record in the shared store (Docker outside swarm keeps a network per host, with its own ID).
 * The first host creates the record and its VNI (claimed once for the cluster, like a VLAN tag);
 * the others must agree with it on subnets, encapsulation, --internal and any VNI asked for. The
 * record, members included, is one key changed by compare-and-swap; the last member to leave
 * deletes it and frees the VNI.
 */
import { OvsnetError } from '../../errors.js';
import { decodeRecord } from '../../store/decode.js';
import { keys } from '../../store/keys.js';
import { absent, del, get, modRevisionIs, put, type Store } from '../../store/types.js';
import { MAX_VNI } from '../options.js';

export interface LogicalMember {
  readonly networkId: string;
  readonly since: string;
}

export interface LogicalNetwork {
  readonly name: string;
  readonly encap: 'vxlan';
  readonly vni: number;
  /** Canonical subnets (IPv4 then IPv6), as Docker's IPAM data gave them. */
  readonly subnets: readonly string[];
  readonly internal: boolean;
  readonly members: Readonly<Record<string, LogicalMember>>;
  readonly createdBy: string;
  readonly createdAt: string;
}

export interface JoinRequest {
  readonly name: string;
  readonly vni: number | undefined;
  readonly subnets: readonly string[];
  readonly internal: boolean;
  readonly host: string;
  readonly networkId: string;
  readonly now: Date;
  /**
   * Whether this host's member with another NetworkID is a leftover (a create that failed after
   * joining, or whose answer was lost): then the new network takes its place.
   */
  readonly isLeftover?: (networkId: string) => Promise<boolean>;
}

const MAX_RETRIES = 32;

function describeLogical(n: LogicalNetwork): string {
  const subnets = n.subnets.length === 0 ? 'no subnet' : `subnet ${n.subnets.join(', ')}`;
  return `logical network ${n.name} is ${n.encap} VNI ${n.vni} with ${subnets}${n.internal ? ', --internal' : ''} (created on host ${n.createdBy} at ${n.createdAt})`;
}

/** What differs between an existing logical network and a request to join it; '' if nothing. */
function mismatch(n: LogicalNetwork, req: JoinRequest): string {
  const wanted = [...req.subnets].sort().join(', ');
  if ([...n.subnets].sort().join(', ') !== wanted)
    return `this request has ${wanted === '' ? 'no subnet' : `subnet ${wanted}`}: pass --subnet ${n.subnets.join(' --subnet ')}`;
  if (req.vni !== undefined && req.vni !== n.vni) return `this request asks for VNI ${req.vni}: omit -o ovsnet.tag or pass ${n.vni}`;
  if (req.internal !== n.internal)
    return `this request is ${req.internal ? '' : 'not '}--internal: ${n.internal ? 'add' : 'drop'} --internal`;
  return '';
}

/** Makes `req.networkId` this host's member of the logical network, creating it if new. */
export async function joinLogical(store: Store, req: JoinRequest): Promise<LogicalNetwork> {
  const key = keys.logicalNetwork(req.name);
  for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
    const kv = await store.get(key);
    const member: LogicalMember = { networkId: req.networkId, since: req.now.toISOString() };
    if (kv === undefined) {
      const vni = req.vni ?? (await freeVni(store));
      const record: LogicalNetwork = {
        name: req.name,
        encap: 'vxlan',
        vni,
        subnets: req.subnets,
        internal: req.internal,
        members: { [req.host]: member },
        createdBy: req.host,
        createdAt: req.now.toISOString(),
      };
      const res = await store.txn({
        compares: [absent(key), absent(keys.tag('vni', vni))],
        success: [put(key, JSON.stringify(record)), put(keys.tag('vni', vni), req.name)],
        failure: [get(keys.tag('vni', vni))],
      });
      if (res.succeeded) return record;
      const holder = res.gets[0]?.value;
      if (req.vni !== undefined && holder !== undefined && holder !== req.name) {
        throw new OvsnetError(
          'TAG_TAKEN',
          `VNI ${vni} is used by logical network ${holder}: pick another from 1 to ${MAX_VNI}, or omit -o ovsnet.tag`,
        );
      }
      continue;
    }
    const current = decodeRecord<LogicalNetwork>(key, kv.value);
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
    const record: LogicalNetwork = { ...current, members: { ...current.members, [req.host]: member } };
    const res = await store.txn({ compares: [modRevisionIs(key, kv.modRevision)], success: [put(key, JSON.stringify(record))] });
    if (res.succeeded) return record;
  }
  throw new OvsnetError('NOT_READY', `logical network ${req.name} is changing too fast on other hosts; retry`);
}

/** Removes the host's member; the last member deletes the network and frees its VNI. */
export async function leaveLogical(store: Store, name: string, host: string, networkId: string | undefined): Promise<void> {
  const key = keys.logicalNetwork(name);
  for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
    const kv = await store.get(key);
    if (kv === undefined) return;
    const current = decodeRecord<LogicalNetwork>(key, kv.value);
    const mine = current.members[host];
    if (mine === undefined || (networkId !== undefined && mine.networkId !== networkId)) return;
    const members = Object.fromEntries(Object.entries(current.members).filter(([h]) => h !== host));
    const last = Object.keys(members).length === 0;
    const res = await store.txn({
      compares: [modRevisionIs(key, kv.modRevision)],
      success: last ? [del(key), del(keys.tag('vni', current.vni))] : [put(key, JSON.stringify({ ...current, members }))],
    });
    if (res.succeeded) return;
  }
  throw new OvsnetError('NOT_READY', `logical network ${name} is changing too fast on other hosts; retry`);
}

/** The lowest VNI no logical network holds. */
async function freeVni(store: Store): Promise<number> {
  const used = new Set((await store.list(`${keys.tags}vni/`)).kvs.map((kv) => Number(kv.key.split('/').pop())));
  let vni = 1;
  while (used.has(vni)) vni++;
  if (vni > MAX_VNI) throw new OvsnetError('TAGS_EXHAUSTED', `all ${MAX_VNI} VNIs are in use: remove a logical network first`);
  return vni;
}
