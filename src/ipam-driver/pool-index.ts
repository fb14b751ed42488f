/**
 * The in-memory mirror of IPAM's part of the store: per pool, its record, the set of reserved
 * offsets and the allocated-address count with the count key's mod revision. Built from one
 * snapshot at start and kept current by a watch (ipam.ts). It is a hint for finding a free
 * address fast; the store's create-if-absent transaction decides.
 */
import { keys, unpart } from '../store/keys.js';
import type { KeyValue, WatchEvent } from '../store/types.js';
import { parseAddress, prefix as parsePrefix, usableBounds, type Prefix } from '../cidr.js';
import { offsetSetFor, type OffsetSet } from './offsets.js';
import { parseRecord, type PoolRecord } from './records.js';

export class PoolState {
  readonly prefix: Prefix;
  readonly range: Prefix;
  /** Absolute bounds of the addresses handed out dynamically; undefined if none can be. */
  readonly bounds: { readonly first: bigint; readonly last: bigint } | undefined;
  readonly reserved: OffsetSet;
  /** Next-fit cursor (absolute address). */
  cursor: bigint;
  count = 0;
  countRevision = 0;

  constructor(readonly record: PoolRecord) {
    this.prefix = parsePrefix(record.pool);
    this.range = record.subPool === undefined ? this.prefix : parsePrefix(record.subPool);
    this.bounds = usableBounds(this.prefix, this.range);
    this.reserved = offsetSetFor(1n << BigInt((this.prefix.family === 4 ? 32 : 128) - this.prefix.bits));
    this.cursor = this.bounds?.first ?? this.prefix.base;
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

type Parsed =
  | { kind: 'pool'; poolId: string }
  | { kind: 'address'; poolId: string; address: string }
  | { kind: 'count'; poolId: string }
  | { kind: 'other' };

function parseKey(key: string): Parsed {
  const rest = key.slice(keys.ipam.length).split('/');
  const [section, a, b] = rest;
  if (section === 'pools' && a !== undefined && rest.length === 2) return { kind: 'pool', poolId: unpart(a) };
  if (section === 'addresses' && a !== undefined && b !== undefined && rest.length === 3) {
    return { kind: 'address', poolId: unpart(a), address: unpart(b) };
  }
  if (section === 'counts' && a !== undefined && rest.length === 2) return { kind: 'count', poolId: unpart(a) };
  return { kind: 'other' };
}

export class PoolIndex {
  readonly pools = new Map<string, PoolState>();

  /** Replaces everything with one snapshot of the keys under keys.ipam. */
  load(kvs: readonly KeyValue[]): void {
    this.pools.clear();
    // Pools first: in key order "addresses/" sorts before "pools/".
    for (const kv of kvs) if (parseKey(kv.key).kind === 'pool') this.apply({ type: 'put', kv });
    for (const kv of kvs) if (parseKey(kv.key).kind !== 'pool') this.apply({ type: 'put', kv });
  }

  apply(event: WatchEvent): void {
    const p = parseKey(event.kv.key);
    switch (p.kind) {
      case 'pool':
        if (event.type === 'delete') this.pools.delete(p.poolId);
        else if (!this.pools.has(p.poolId)) this.pools.set(p.poolId, new PoolState(parseRecord<PoolRecord>(event.kv.value, 'pool')));
        return;
      case 'address': {
        const pool = this.pools.get(p.poolId);
        if (pool !== undefined) pool.mark(parseAddress(p.address).value, event.type === 'put');
        return;
      }
      case 'count': {
        const pool = this.pools.get(p.poolId);
        if (pool === undefined) return;
        // Events arrive in revision order, but a local result may have been applied already.
        if (event.kv.modRevision >= pool.countRevision) {
          pool.count = event.type === 'put' ? Number(event.kv.value) : 0;
          pool.countRevision = event.type === 'put' ? event.kv.modRevision : 0;
        }
        return;
      }
      case 'other':
        return;
    }
  }
}
