/**
 * The logical network records (vxlan/logical.ts, vxlan/swarm.ts) and the cluster tags they hold,
 * in the store: every key of theirs is built and every read and write of them made here, while
 * what to write stays with vxlan/. A record changes by compare-and-swap on its revision.
 */
import type { Logger } from '../../lib/log.js';
import { decodeRecord } from '../../store/decode.js';
import { FollowedRecords } from '../../store/follow.js';
import { keys, unpart } from '../../store/keys.js';
import { absent, del, get, modRevisionIs, put, type Store } from '../../store/types.js';
import type { Encap, LogicalNetwork } from '../model/records.js';

/** A record as read, under its name, with the revision its next write compares. */
export interface ReadLogical {
  readonly name: string;
  readonly record: LogicalNetwork;
  readonly modRevision: number;
}

/** Where a wire ID is claimed for the cluster: VNIs for vxlan, uplink VLAN tags for vlan. */
const idKey = (encap: Encap, id: number) => keys.tag(encap === 'vxlan' ? 'vni' : 'uplink-vlan', id);

export async function readLogical(store: Store, name: string): Promise<ReadLogical | undefined> {
  const kv = await store.get(keys.logicalNetwork(name));
  return kv === undefined ? undefined : { name, record: decodeRecord<LogicalNetwork>(kv.key, kv.value), modRevision: kv.modRevision };
}

/** Whether hosts sharing this store have a logical network of that name (not decoded). */
export async function logicalExists(store: Store, name: string): Promise<boolean> {
  return (await store.get(keys.logicalNetwork(name))) !== undefined;
}

/** How many logical networks the store holds. */
export async function countLogical(store: Store): Promise<number> {
  return (await store.list(keys.logicalNetworks)).kvs.length;
}

/**
 * Writes a new record with its wire ID claimed, unless either exists. Returns whether it was
 * written, and else who holds the ID (undefined when free: the record itself was there).
 */
export async function createLogical(store: Store, record: LogicalNetwork): Promise<{ created: boolean; holder?: string }> {
  const key = keys.logicalNetwork(record.name);
  const id = idKey(record.encap, record.vni);
  const res = await store.txn({
    compares: [absent(key), absent(id)],
    success: [put(key, JSON.stringify(record)), put(id, record.name)],
    failure: [get(id)],
  });
  const holder = res.gets[0]?.value;
  return { created: res.succeeded, ...(holder === undefined ? {} : { holder }) };
}

/** Replaces the record `read`; false when it changed since. */
export async function replaceLogical(store: Store, read: ReadLogical, record: LogicalNetwork): Promise<boolean> {
  const key = keys.logicalNetwork(read.name);
  return (await store.txn({ compares: [modRevisionIs(key, read.modRevision)], success: [put(key, JSON.stringify(record))] })).succeeded;
}

/** Deletes the record `read` and frees its wire ID; false when it changed since. */
export async function deleteLogical(store: Store, read: ReadLogical): Promise<boolean> {
  const key = keys.logicalNetwork(read.name);
  const { encap, vni } = read.record;
  return (await store.txn({ compares: [modRevisionIs(key, read.modRevision)], success: [del(key), del(idKey(encap, vni))] })).succeeded;
}

/** Who holds a VNI for the cluster (a logical network's name), if anyone. */
export async function vniHolder(store: Store, vni: number): Promise<string | undefined> {
  return (await store.get(keys.tag('vni', vni)))?.value;
}

/** The VNIs, or the VLAN tags, that logical networks hold for the cluster. */
export async function clusterIds(store: Store, encap: Encap): Promise<Set<number>> {
  const prefix = keys.clusterTags(encap === 'vxlan' ? 'vni' : 'uplink-vlan');
  return new Set((await store.list(prefix)).kvs.map((kv) => Number(kv.key.split('/').pop())));
}

/** The logical network records, followed by name (tunnels); `onChange` after every change. */
export function followLogical(store: Store, log: Logger, onChange: () => void): FollowedRecords<LogicalNetwork> {
  return new FollowedRecords<LogicalNetwork>({
    store,
    prefix: keys.logicalNetworks,
    nameOf: unpart,
    log,
    what: 'logical networks',
    onChange,
  });
}
