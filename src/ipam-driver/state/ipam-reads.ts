/**
 * Reads of IPAM's records: typed, with the revisions a later compare needs. A listing skips a
 * malformed record and notes it (decodeAll); a single read throws STORE_RECORD_INVALID.
 */
import { decodeAll } from '../../store/decode.js';
import type { KeyValue, Store } from '../../store/types.js';
import { ipamKeys, IPAM_PREFIX, parseIpamKey } from './ipam-keys.js';
import { countTxn, reservationTxn, stored, type Seen, type Stored, type StoredCount } from './ipam-txn.js';
import { decodeBlock, decodePool, decodeReservation, type BlockRecord, type PoolRecord, type Reservation } from './records.js';

export async function readPool(store: Store, poolId: string): Promise<Stored<PoolRecord> | undefined> {
  const kv = await store.get(ipamKeys.pool(poolId));
  return kv === undefined ? undefined : stored(kv, decodePool);
}

/** Every pool record that decodes. */
export async function listPools(store: Store): Promise<Stored<PoolRecord>[]> {
  return decodeAll((await store.list(ipamKeys.pools)).kvs, (kv) => stored(kv as KeyValue, decodePool));
}

export async function readReservation(store: Store, poolId: string, address: string): Promise<Stored<Reservation> | undefined> {
  const kv = await store.get(ipamKeys.reservation(poolId, address));
  return kv === undefined ? undefined : stored(kv, decodeReservation);
}

/** A reservation as stored, seen even when its record does not decode (reservationTxn.see). */
export async function seeReservation(store: Store, poolId: string, address: string): Promise<Seen | undefined> {
  return reservationTxn.see(await store.get(ipamKeys.reservation(poolId, address)));
}

/** The reservations of a pool, or of every pool when none is named. */
export async function listReservations(store: Store, poolId?: string): Promise<Reservation[]> {
  const prefix = poolId === undefined ? ipamKeys.allReservations : ipamKeys.reservations(poolId);
  return decodeAll((await store.list(prefix)).kvs, decodeReservation);
}

export async function readCount(store: Store, poolId: string): Promise<StoredCount | undefined> {
  return countTxn.read(await store.get(ipamKeys.count(poolId)));
}

/** The blocks of a shared pool, or of every pool when none is named: first address, record, revision. */
export async function listBlocks(store: Store, poolId?: string): Promise<{ start: string; block: Stored<BlockRecord> }[]> {
  const { kvs } = await store.list(poolId === undefined ? ipamKeys.allBlocks : ipamKeys.blocks(poolId));
  return decodeAll(kvs, (kv) => {
    const key = parseIpamKey(kv.key);
    return { start: key.kind === 'block' ? key.start : '', block: stored(kv as KeyValue, decodeBlock) };
  });
}

/** An address space's key (bumped by every pool creation and release in it); 0s when never bumped. */
export async function readSpace(store: Store, space: string): Promise<{ version: number; modRevision: number }> {
  const kv = await store.get(ipamKeys.space(space));
  return { version: kv?.version ?? 0, modRevision: kv?.modRevision ?? 0 };
}

/** Where the search for the next dynamic pool of a family resumes (0 at first). */
export async function readCursor(store: Store, family: 4 | 6): Promise<{ next: bigint; modRevision: number }> {
  const kv = await store.get(ipamKeys.cursor(family));
  return { next: BigInt(kv?.value ?? '0'), modRevision: kv?.modRevision ?? 0 };
}

/** Sticky records with when each was released (NaN when unreadable), and how to forget one unchanged. */
export async function listSticky(store: Store): Promise<{ releasedAtMs: number; forget: Parameters<Store['txn']>[0] }[]> {
  return (await store.list(ipamKeys.allSticky)).kvs.map((kv) => {
    let releasedAtMs = NaN;
    try {
      releasedAtMs = Date.parse((JSON.parse(kv.value) as { releasedAt: string }).releasedAt);
    } catch {
      // not one of ours: kept
    }
    return {
      releasedAtMs,
      forget: {
        compares: [{ key: kv.key, target: 'modRevision', op: '==', modRevision: kv.modRevision }],
        success: [{ type: 'delete', key: kv.key }],
      },
    };
  });
}

/** One snapshot of every IPAM key, for a PoolIndex of its own (the CLI). */
export async function ipamSnapshot(store: Store): Promise<readonly KeyValue[]> {
  return (await store.list(IPAM_PREFIX)).kvs;
}

/** The reservations of a pool in a snapshot. */
export function reservationsIn(snapshot: readonly KeyValue[], poolId: string): Reservation[] {
  return snapshot.filter((kv) => kv.key.startsWith(ipamKeys.reservations(poolId))).map(decodeReservation);
}

/** Pool counts that are not whole numbers (`ovsnet doctor`): each key with what is wrong; `read` counts all. */
export async function countProblems(store: Store): Promise<{ read: number; bad: string[] }> {
  const { kvs } = await store.list(ipamKeys.counts);
  const bad = kvs
    .filter((kv) => !/^\d{1,15}$/.test(kv.value))
    .map((kv) => `${kv.key} (a pool count, not a whole number: ${JSON.stringify(kv.value.slice(0, 40))})`);
  return { read: kvs.length, bad };
}
