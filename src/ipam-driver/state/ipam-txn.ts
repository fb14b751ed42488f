/**
 * Transaction parts on IPAM's keys: the compares and writes that allocation, pools and recovery
 * put together into one store transaction, and the decoding of what a failed one's `get`s
 * return. Values are the records' JSON; the key layout stays in ipam-keys.ts.
 */
import { absent, del, get, modRevisionIs, put, type Compare, type KeyValue, type Op } from '../../store/types.js';
import { ipamKeys } from './ipam-keys.js';
import { decodeBlock, decodeReservation, type BlockRecord, type PoolRecord, type Reservation, type StickyRecord } from './records.js';

/** A record as stored: its value decoded, with the revisions a later compare needs. */
export interface Stored<T> {
  readonly record: T;
  readonly modRevision: number;
  readonly createRevision: number;
  readonly version: number;
}

export const stored = <T>(kv: KeyValue, decode: (kv: KeyValue) => T): Stored<T> => ({
  record: decode(kv),
  modRevision: kv.modRevision,
  createRevision: kv.createRevision,
  version: kv.version,
});

/** A reservation as stored: `record` undefined when it does not decode. */
export interface Seen {
  readonly record: Reservation | undefined;
  readonly modRevision: number;
}

/** An allocated-address count as stored (one-host pools). */
export interface StoredCount {
  readonly count: number;
  readonly modRevision: number;
}

/** A modRevision compare, or "absent" for a key not seen (revision 0 or unknown). */
const unchangedOrAbsent = (key: string, modRevision: number | undefined): Compare =>
  modRevision === undefined ? absent(key) : modRevisionIs(key, modRevision);

export const poolTxn = {
  unchanged: (poolId: string, modRevision: number): Compare => modRevisionIs(ipamKeys.pool(poolId), modRevision),
  put: (record: PoolRecord): Op => put(ipamKeys.pool(record.poolId), JSON.stringify(record)),
  get: (poolId: string): Op => get(ipamKeys.pool(poolId)),
  /** The pool with everything under it: reservations, blocks, sticky records, count. */
  removeAll: (poolId: string): Op[] => [
    del(ipamKeys.pool(poolId)),
    { type: 'deletePrefix', prefix: ipamKeys.reservations(poolId) },
    { type: 'deletePrefix', prefix: ipamKeys.blocks(poolId) },
    { type: 'deletePrefix', prefix: ipamKeys.sticky(poolId) },
    { type: 'deletePrefix', prefix: ipamKeys.tombstones(poolId) },
    del(ipamKeys.count(poolId)),
  ],
  /** The store's view of a pool record this process just wrote, for the pool index. */
  written: (record: PoolRecord, meta: Omit<Stored<unknown>, 'record'>): KeyValue => ({
    key: ipamKeys.pool(record.poolId),
    value: JSON.stringify(record),
    createRevision: meta.createRevision,
    modRevision: meta.modRevision,
    version: meta.version,
    lease: '0',
  }),
};

export const reservationTxn = {
  absent: (poolId: string, address: string): Compare => absent(ipamKeys.reservation(poolId, address)),
  present: (poolId: string, address: string): Compare => ({ key: ipamKeys.reservation(poolId, address), target: 'present' }),
  unchanged: (poolId: string, address: string, modRevision: number): Compare =>
    modRevisionIs(ipamKeys.reservation(poolId, address), modRevision),
  /** The stored value is exactly this JSON (what this process wrote: no read needed). */
  valueIs: (poolId: string, address: string, json: string): Compare => ({
    key: ipamKeys.reservation(poolId, address),
    target: 'value',
    op: '==',
    value: json,
  }),
  put: (r: Reservation): Op => put(ipamKeys.reservation(r.poolId, r.address), JSON.stringify(r)),
  del: (poolId: string, address: string): Op => del(ipamKeys.reservation(poolId, address)),
  get: (poolId: string, address: string): Op => get(ipamKeys.reservation(poolId, address)),
  /** A `get` result. */
  read: (kv: KeyValue | undefined): Stored<Reservation> | undefined => (kv === undefined ? undefined : stored(kv, decodeReservation)),
  /** A `get` result, a record that does not decode seen with no record (a release may still free it by revision). */
  see: (kv: KeyValue | undefined): Seen | undefined => {
    if (kv === undefined) return undefined;
    try {
      return { record: decodeReservation(kv), modRevision: kv.modRevision };
    } catch {
      return { record: undefined, modRevision: kv.modRevision };
    }
  },
};

export const countTxn = {
  unchanged: (poolId: string, modRevision: number): Compare => modRevisionIs(ipamKeys.count(poolId), modRevision),
  put: (poolId: string, count: number): Op => put(ipamKeys.count(poolId), String(count)),
  del: (poolId: string): Op => del(ipamKeys.count(poolId)),
  get: (poolId: string): Op => get(ipamKeys.count(poolId)),
  /** A `get` result (or a read): undefined when there is no count yet. */
  read: (kv: KeyValue | undefined): StoredCount | undefined =>
    kv === undefined ? undefined : { count: Number(kv.value), modRevision: kv.modRevision },
};

export const blockTxn = {
  /** Unchanged since `modRevision`; absent when it was not seen (undefined). */
  unchanged: (poolId: string, start: string, modRevision: number | undefined): Compare =>
    unchangedOrAbsent(ipamKeys.block(poolId, start), modRevision),
  put: (poolId: string, start: string, record: BlockRecord): Op => put(ipamKeys.block(poolId, start), JSON.stringify(record)),
  del: (poolId: string, start: string): Op => del(ipamKeys.block(poolId, start)),
  get: (poolId: string, start: string): Op => get(ipamKeys.block(poolId, start)),
  /** A `get` result: the record (undefined when gone) and its revision (0 when gone). */
  read: (kv: KeyValue | undefined): { record: BlockRecord | undefined; modRevision: number | undefined } =>
    kv === undefined ? { record: undefined, modRevision: undefined } : { record: decodeBlock(kv), modRevision: kv.modRevision },
};

export const stickyTxn = {
  put: (poolId: string, holder: string, record: StickyRecord): Op => put(ipamKeys.stickyKey(poolId, holder), JSON.stringify(record)),
};

/** An address space's key: bumped by every pool creation and release in it. */
export const spaceTxn = {
  unchanged: (space: string, modRevision: number): Compare => modRevisionIs(ipamKeys.space(space), modRevision),
  bump: (space: string, version: number): Op => put(ipamKeys.space(space), String(version + 1)),
};

/** Where the search for the next dynamic pool of a family resumes. */
export const cursorTxn = {
  unchanged: (family: 4 | 6, modRevision: number): Compare => modRevisionIs(ipamKeys.cursor(family), modRevision),
  put: (family: 4 | 6, next: bigint): Op => put(ipamKeys.cursor(family), next.toString()),
};
