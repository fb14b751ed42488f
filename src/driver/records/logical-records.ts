/**
 * The logical network records (vxlan/logical.ts, vxlan/swarm.ts), their members and the cluster
 * tags they hold, in the store: every key of theirs is built and every read and write of them
 * made here, while what to write stays with vxlan/.
 *
 * A record holds what every host agrees on (VNI, subnets, ...) and changes by compare-and-swap
 * on its revision. Each member is a key of its own (layout 2), so a join or leave writes a few
 * hundred bytes, whatever the number of hosts. What keeps the record and its members coherent:
 * - a join puts its member key only while the record has the revision it read (never onto a
 *   network being deleted, or one deleted and made again);
 * - a leave deletes its key only while another member's key (its witness) is unchanged, so two
 *   leaves at once never both see the other and leave the network with no member;
 * - the last member deletes the record in two steps: it marks the record `closing`, lists the
 *   members, and deletes only if the record still has the marked revision. A join that finds the
 *   mark clears it as it joins, which makes that delete fail and the leaver look again.
 * Members still inside a record (written by a layout-1 daemon) are read as members too, and
 * moved to keys of their own by the next write of the record (migrateLogical at start).
 */
import { decodeOrSkip, decodeRecord } from '../../store/decode.js';
import { keys, unpart } from '../../store/keys.js';
import { absent, del, get, modRevisionIs, put, type Compare, type KeyValue, type Op, type Store } from '../../store/types.js';
import type { Encap, LogicalMember, LogicalNetwork } from '../model/records.js';

/** A record as read, under its name, with the revisions its next write compares. */
export interface ReadLogical {
  readonly name: string;
  /** The record with its members: their keys, and any still inside it (layout 1's form). */
  readonly record: LogicalNetwork;
  readonly modRevision: number;
  /** The mod revision of each member key, by host (a malformed one too: a join replaces it). */
  readonly memberRevisions: ReadonlyMap<string, number>;
  /** Members inside the record (layout 1's form): moved out by its next write. */
  readonly inRecord: readonly string[];
}

/** The record as stored: no members (but layout 1's, until moved out). */
type StoredLogical = Omit<LogicalNetwork, 'members'> & { readonly members?: Readonly<Record<string, LogicalMember>> };

/** Where a wire ID is claimed for the cluster: VNIs for vxlan, uplink VLAN tags for vlan. */
const idKey = (encap: Encap, id: number) => keys.tag(encap === 'vxlan' ? 'vni' : 'uplink-vlan', id);

/** The stored form of a record: without its members. */
function stored(record: LogicalNetwork | StoredLogical): string {
  const { members: _members, ...rest } = record;
  return JSON.stringify(rest);
}

/** The keys' members of one network, by host, from a listing of its member prefix. */
function keyedMembers(name: string, kvs: readonly KeyValue[]): { members: Map<string, LogicalMember>; revisions: Map<string, number> } {
  const prefix = keys.logicalMembers(name);
  const members = new Map<string, LogicalMember>();
  const revisions = new Map<string, number>();
  for (const kv of kvs) {
    const host = unpart(kv.key.slice(prefix.length));
    revisions.set(host, kv.modRevision);
    const member = decodeOrSkip<LogicalMember>(kv.key, kv.value);
    if (member !== undefined) members.set(host, { networkId: member.networkId, since: member.since });
  }
  return { members, revisions };
}

/** A record and its keyed members, put together (keys win over layout 1's members). */
function assemble(record: StoredLogical, keyed: ReadonlyMap<string, LogicalMember>): LogicalNetwork {
  return { ...record, members: { ...(record.members ?? {}), ...Object.fromEntries(keyed) } };
}

export async function readLogical(store: Store, name: string): Promise<ReadLogical | undefined> {
  const [kv, page] = await Promise.all([store.get(keys.logicalNetwork(name)), store.list(keys.logicalMembers(name))]);
  if (kv === undefined) return undefined;
  const record = decodeRecord<StoredLogical>(kv.key, kv.value);
  const { members, revisions } = keyedMembers(name, page.kvs);
  const inRecord = Object.keys(record.members ?? {});
  return { name, record: assemble(record, members), modRevision: kv.modRevision, memberRevisions: revisions, inRecord };
}

/** Whether hosts sharing this store have a logical network of that name (not decoded). */
export async function logicalExists(store: Store, name: string): Promise<boolean> {
  return (await store.get(keys.logicalNetwork(name))) !== undefined;
}

/** How many logical networks the store holds. */
export async function countLogical(store: Store): Promise<number> {
  return (await store.list(keys.logicalNetworks)).kvs.length;
}

/** Puts a member's own key. */
const putMember = (name: string, host: string, m: LogicalMember): Op =>
  put(keys.logicalMember(name, host), JSON.stringify({ networkId: m.networkId, since: m.since }));

/**
 * A rewrite of the record `read` as `record`, while it has the revision read: its compares and
 * ops, which move layout 1's members (read.inRecord) to keys of their own.
 */
function rewrite(read: ReadLogical, record: LogicalNetwork): { compares: Compare[]; ops: Op[] } {
  const compares: Compare[] = [modRevisionIs(keys.logicalNetwork(read.name), read.modRevision)];
  const ops: Op[] = [put(keys.logicalNetwork(read.name), stored(record))];
  for (const host of read.inRecord) {
    const m = record.members[host];
    if (m === undefined || read.memberRevisions.has(host)) continue; // its key, if any, wins
    compares.push(absent(keys.logicalMember(read.name, host)));
    ops.push(putMember(read.name, host, m));
  }
  return { compares, ops };
}

/**
 * Writes a new record with its wire ID claimed and its members' keys, unless the record or the ID
 * exists. Returns whether it was written, and else who holds the ID (undefined when free: the
 * record itself was there).
 */
export async function createLogical(store: Store, record: LogicalNetwork): Promise<{ created: boolean; holder?: string }> {
  const key = keys.logicalNetwork(record.name);
  const id = idKey(record.encap, record.vni);
  const members = Object.entries(record.members).map(([host, m]) => putMember(record.name, host, m));
  const res = await store.txn({
    compares: [absent(key), absent(id)],
    success: [put(key, stored(record)), put(id, record.name), ...members],
    failure: [get(id)],
  });
  const holder = res.gets[0]?.value;
  return { created: res.succeeded, ...(holder === undefined ? {} : { holder }) };
}

/** Replaces the record `read` (its members stay); false when it changed since. */
export async function replaceLogical(store: Store, read: ReadLogical, record: LogicalNetwork): Promise<boolean> {
  const { compares, ops } = rewrite(read, record);
  return (await store.txn({ compares, success: ops })).succeeded;
}

/**
 * Makes `member` the host's member of the network `read` (its key put, or replaced), while the
 * record and the host's key are as read; clears a `closing` mark. False when either changed since.
 */
export async function addMember(store: Store, read: ReadLogical, host: string, member: LogicalMember): Promise<boolean> {
  const memberKey = keys.logicalMember(read.name, host);
  const rev = read.memberRevisions.get(host);
  const compares: Compare[] = [modRevisionIs(keys.logicalNetwork(read.name), read.modRevision)];
  compares.push(rev === undefined ? absent(memberKey) : modRevisionIs(memberKey, rev));
  const ops: Op[] = [putMember(read.name, host, member)];
  if (read.record.closing !== undefined) {
    const { closing: _closing, ...open } = read.record;
    const again = rewrite(read, open);
    compares.push(...again.compares.slice(1));
    ops.push(...again.ops);
  }
  return (await store.txn({ compares, success: ops })).succeeded;
}

/**
 * Deletes the host's member key of the network `read` while it is as read and its witness stands:
 * another member's key (unchanged), or with no witness the record itself (unchanged: a swarm
 * network kept with no member). False when any changed since.
 */
export async function removeMember(store: Store, read: ReadLogical, host: string, witness: string | undefined): Promise<boolean> {
  const memberKey = keys.logicalMember(read.name, host);
  const rev = read.memberRevisions.get(host);
  const compares: Compare[] = [rev === undefined ? absent(memberKey) : modRevisionIs(memberKey, rev)];
  const witnessRev = witness === undefined ? undefined : read.memberRevisions.get(witness);
  if (witness === undefined || witnessRev === undefined) compares.push(modRevisionIs(keys.logicalNetwork(read.name), read.modRevision));
  else compares.push(modRevisionIs(keys.logicalMember(read.name, witness), witnessRev));
  return (await store.txn({ compares, success: [del(memberKey)] })).succeeded;
}

/**
 * Deletes the network `read`, its wire ID and `host`'s member key (if given) if no other member is left
 * (the mark, list and delete above). 'deleted'; 'members' when others are members (the mark is
 * taken off again); 'changed' when the record changed meanwhile (read it again).
 */
export async function deleteIfEmpty(store: Store, read: ReadLogical, host?: string): Promise<'deleted' | 'members' | 'changed'> {
  const recordKey = keys.logicalNetwork(read.name);
  const marked = { ...read.record, closing: host ?? 'FreeNetwork' };
  const mark = rewrite(read, marked);
  const res = await store.txn({ compares: mark.compares, success: mark.ops });
  if (!res.succeeded) return 'changed';
  const markedRead: ReadLogical = { ...read, record: marked, modRevision: res.revision, inRecord: [] };
  const { kvs } = await store.list(keys.logicalMembers(read.name));
  const own = host === undefined ? undefined : keys.logicalMember(read.name, host);
  const others = kvs.filter((kv) => kv.key !== own).length;
  if (others > 0) {
    const { closing: _closing, ...open } = marked;
    return (await replaceLogical(store, markedRead, open)) ? 'members' : 'changed';
  }
  const gone = await store.txn({
    compares: [modRevisionIs(recordKey, res.revision)],
    success: [del(recordKey), del(idKey(read.record.encap, read.record.vni)), ...kvs.map((kv) => del(kv.key))],
  });
  return gone.succeeded ? 'deleted' : 'changed';
}

/**
 * Moves layout 1's members (inside the records) to keys of their own, record by record (each by
 * compare-and-swap, read again when it changed). Idempotent: run at start on a layout-1 store.
 */
export async function migrateLogical(store: Store): Promise<void> {
  const { kvs } = await store.list(keys.logicalNetworks);
  for (const kv of kvs) {
    const name = unpart(kv.key.slice(keys.logicalNetworks.length));
    for (;;) {
      const read = await readLogical(store, name);
      if (read === undefined || read.inRecord.length === 0) break;
      if (await replaceLogical(store, read, read.record)) break;
    }
  }
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
