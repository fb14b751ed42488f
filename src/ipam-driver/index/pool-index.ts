/**
 * The in-memory mirror of IPAM's part of the store: per pool, its record, the set of reserved
 * offsets and the allocated-address count with the count key's mod revision. Built from one
 * snapshot at start and kept current by a watch (ipam.ts). It is a hint for finding a free
 * address fast; the store's create-if-absent transaction decides.
 */
import type { KeyValue, WatchEvent } from '../../store/types.js';
import { parseAddress, prefix as parsePrefix, size, usableBounds, type Prefix } from '../../lib/cidr.js';
import { isOvsnetError, messageOf } from '../../lib/errors.js';
import { invalidRecord, skippedRecords } from '../../store/decode.js';
import { offsetSetFor, type OffsetSet } from './offsets.js';
import { decodeBlock, decodePool, type BlockRecord, type PoolRecord, type Reservation } from '../state/records.js';
import { parseIpamKey } from '../state/ipam-keys.js';
import type { StoredCount } from '../state/ipam-txn.js';

/** A block as last seen: its record (undefined once deleted) and the revision that said so. */
export interface BlockState {
  readonly record: BlockRecord | undefined;
  readonly modRevision: number;
}

/** Default block of a shared pool: a /26 (64 addresses), for IPv6 pools as many addresses. */
const DEFAULT_BLOCK_BITS = 26;

/** Addresses per block of a shared pool: --ipam-opt ovsnet.block-size, at most the pool. */
export function blockSizeOf(record: PoolRecord): bigint {
  const p = parsePrefix(record.pool);
  const v4Bits = Number(record.options['ovsnet.block-size'] ?? DEFAULT_BLOCK_BITS);
  return 1n << BigInt(Math.min(32 - v4Bits, (p.family === 4 ? 32 : 128) - p.bits));
}

export class PoolState {
  readonly prefix: Prefix;
  readonly range: Prefix;
  /** Absolute bounds of the addresses handed out dynamically; undefined if none can be. */
  readonly bounds: { readonly first: bigint; readonly last: bigint } | undefined;
  readonly reserved: OffsetSet;
  /** Addresses in the pool. */
  readonly size: bigint;
  /** Next-fit cursor (absolute address). */
  cursor: bigint;
  count = 0;
  countRevision = 0;
  /** Shared pools: blocks by first address. */
  readonly blocks = new Map<bigint, BlockState>();
  /** Addresses per block (shared pools), at most the pool's size. */
  readonly blockSize: bigint;

  constructor(public record: PoolRecord) {
    this.prefix = parsePrefix(record.pool);
    this.range = record.subPool === undefined ? this.prefix : parsePrefix(record.subPool);
    this.bounds = usableBounds(this.prefix, this.range);
    this.size = size(this.prefix);
    this.reserved = offsetSetFor(this.size);
    this.cursor = this.bounds?.first ?? this.prefix.base;
    this.blockSize = blockSizeOf(record);
  }

  get shared(): boolean {
    return this.record.logical !== undefined;
  }

  /** Reserved addresses: the pool's count, or for a shared pool the sum over its blocks. */
  get used(): number {
    if (!this.shared) return this.count;
    let n = 0;
    for (const b of this.blocks.values()) n += b.record?.count ?? 0;
    return n;
  }

  /** First address of the block holding `address`. */
  blockOf(address: bigint): bigint {
    return this.prefix.base + ((address - this.prefix.base) / this.blockSize) * this.blockSize;
  }

  /** A newer view of a block replaces an older one, never the reverse. */
  setBlock(start: bigint, record: BlockRecord | undefined, revision: number): void {
    if (revision >= (this.blocks.get(start)?.modRevision ?? 0)) this.blocks.set(start, { record, modRevision: revision });
  }

  /** The first free dynamic address of the block starting at `start`; undefined if none. */
  freeIn(start: bigint): bigint | undefined {
    if (this.bounds === undefined) return undefined;
    const lo = start > this.bounds.first ? start : this.bounds.first;
    const end = start + this.blockSize - 1n;
    const hi = end < this.bounds.last ? end : this.bounds.last;
    if (lo > hi) return undefined;
    const base = this.prefix.base;
    const off = this.reserved.nextFree(lo - base, hi - base, lo - base);
    return off === undefined ? undefined : base + off;
  }

  /** Starts of the blocks that hold dynamic addresses, bounded to `limit` of them. */
  *blockStarts(limit: number): Generator<bigint> {
    if (this.bounds === undefined) return;
    let start = this.blockOf(this.bounds.first);
    for (let i = 0; i < limit && start <= this.bounds.last; i++, start += this.blockSize) yield start;
  }

  /** Usable addresses of the dynamic range (the exhaustion message names it). */
  get capacity(): bigint {
    return this.bounds === undefined ? 0n : this.bounds.last - this.bounds.first + 1n;
  }

  /** A free-looking address of the dynamic range at or after the cursor; undefined if none. */
  candidate(): bigint | undefined {
    if (this.bounds === undefined) return undefined;
    const base = this.prefix.base;
    const off = this.reserved.nextFree(this.bounds.first - base, this.bounds.last - base, this.cursor - base);
    return off === undefined ? undefined : base + off;
  }

  mark(address: bigint, reserved: boolean): void {
    const off = address - this.prefix.base;
    if (reserved) this.reserved.add(off);
    else this.reserved.delete(off);
  }

  isMarked(address: bigint): boolean {
    return this.reserved.has(address - this.prefix.base);
  }
}

/** The pool's count as read from the store (none: 0, never written). */
export function refreshCount(pool: PoolState, stored: StoredCount | undefined): void {
  pool.count = stored?.count ?? 0;
  pool.countRevision = stored?.modRevision ?? 0;
}

export class PoolIndex {
  readonly pools = new Map<string, PoolState>();

  /** Replaces everything with one snapshot of the keys under IPAM_PREFIX (state/ipam-keys.ts). */
  load(kvs: readonly KeyValue[]): void {
    this.pools.clear();
    // Pools first: in key order "addresses/" sorts before "pools/".
    for (const kv of kvs) if (parseIpamKey(kv.key).kind === 'pool') this.apply({ type: 'put', kv });
    for (const kv of kvs) if (parseIpamKey(kv.key).kind !== 'pool') this.apply({ type: 'put', kv });
  }

  /**
   * One change. A malformed record (a value that fails its shape, a key naming no address, a
   * count that is not a number, an address outside its pool) is skipped and noted (decode.ts):
   * the index goes on with everything else, and a pool it had keeps its last good record.
   */
  apply(event: WatchEvent): void {
    try {
      this.applyOne(event);
      skippedRecords.cleared(event.kv.key);
    } catch (err) {
      skippedRecords.skip(event.kv.key, event.kv.value, isOvsnetError(err) ? err : invalidRecord(event.kv.key, messageOf(err)));
    }
  }

  /**
   * A put of `record` at `key` (its reservation key), as apply() would make of its text: for a
   * record this process wrote, whose text need not be decoded again (own-reservations.ts).
   */
  applyReservation(key: string, record: Reservation): void {
    try {
      this.reserved(record.poolId, record.address);
      skippedRecords.cleared(key);
    } catch (err) {
      skippedRecords.skip(key, JSON.stringify(record), invalidRecord(key, messageOf(err)));
    }
  }

  /** Marks `address` of the pool reserved; throws when it is outside the pool. */
  private reserved(poolId: string, address: string, reserved = true): void {
    const pool = this.pools.get(poolId);
    if (pool === undefined) return;
    const offset = parseAddress(address).value - pool.prefix.base;
    if (offset < 0n || offset >= pool.size) throw new Error(`the address is outside the pool ${pool.record.pool}`);
    pool.mark(pool.prefix.base + offset, reserved);
  }

  private applyOne(event: WatchEvent): void {
    const p = parseIpamKey(event.kv.key);
    switch (p.kind) {
      case 'pool':
        if (event.type === 'delete') this.pools.delete(p.poolId);
        else {
          const record = decodePool(event.kv);
          const pool = this.pools.get(p.poolId);
          if (pool === undefined) this.pools.set(p.poolId, new PoolState(record));
          else pool.record = record; // shared by a logical network, or its users changed
        }
        return;
      case 'block': {
        const pool = this.pools.get(p.poolId);
        const record = event.type === 'put' ? decodeBlock(event.kv) : undefined;
        pool?.setBlock(parseAddress(p.start).value, record, event.kv.modRevision);
        return;
      }
      case 'address':
        this.reserved(p.poolId, p.address, event.type === 'put');
        return;
      case 'count': {
        const pool = this.pools.get(p.poolId);
        if (pool === undefined) return;
        // Events arrive in revision order, but a local result may have been applied already.
        if (event.type === 'put' && !/^\d{1,15}$/.test(event.kv.value))
          throw new Error(`the count ${JSON.stringify(event.kv.value.slice(0, 20))} is not a whole number`);
        if (event.kv.modRevision >= pool.countRevision) {
          pool.count = event.type === 'put' ? Number(event.kv.value) : 0;
          pool.countRevision = event.type === 'put' ? event.kv.modRevision : 0;
        }
        return;
      }
      case 'sticky':
      case 'other':
        return;
    }
  }
}
