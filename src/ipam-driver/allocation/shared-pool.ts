/**
 * Pools shared by a logical network across hosts: addresses are handed out from blocks.
 *
 * - The pool is cut into blocks (default /26; `--ipam-opt ovsnet.block-size=N`). A host claims a
 *   block by compare-and-swap on the block's record and then takes addresses inside it; only its
 *   owner writes a block's record, so hosts never contend on a shared count key. A block that
 *   empties goes back (its record is deleted).
 * - Every address still has its reservation record, made by create-if-absent in the same
 *   transaction as the block's count: an address is never handed out twice, whoever owns what,
 *   and `--ip` anywhere in the pool is checked against every host's reservations.
 * - When no block is free, a host borrows a free address from another host's block rather than
 *   fail while the pool has room.
 * - The block's count moves only with a new reservation or a real release, like a pool's count.
 */
import { OvsnetError } from '../../lib/errors.js';
import { keys } from '../../store/keys.js';
import { absent, del, get, modRevisionIs, put, type Compare, type KeyValue, type Op, type Store } from '../../store/types.js';
import { formatAddress, parseAddress } from '../../lib/cidr.js';
import type { AddressStrategy } from './one-host-pool.js';
import type { PoolState } from '../index/pool-index.js';
import { decodeBlock, decodePool, decodeReservation, type BlockRecord, type PoolRecord, type Reservation } from '../state/records.js';

const MAX_RETRIES = 64;
/** How many blocks one search looks at: enough to find an unclaimed one past the claimed. */
const extraBlocks = (pool: PoolState) => pool.blocks.size + 2;

export interface SharedDeps {
  readonly store: Store;
  readonly host: string;
  readonly now: () => Date;
  /** A reservation's value as this process last wrote it (bind.ts RecentReservations), to compare instead of reading. */
  readonly written?: (key: string) => string | undefined;
}

/** Where a dynamic address comes from: this host's block, a block to claim, or a borrowed one. */
interface Pick {
  readonly value: bigint;
  readonly start: bigint;
  readonly claim: boolean;
}

export class SharedPools implements AddressStrategy {
  constructor(private readonly deps: SharedDeps) {}

  /**
   * Makes a one-host pool shared: its reservations so far (the gateway, aux addresses) move
   * from the pool's count into unowned blocks, in one transaction with the pool record's new
   * `logical` and `users`. 'moved' when the pool or its count changed meanwhile (try again).
   */
  async share(pool: PoolState, name: string): Promise<'shared' | 'moved' | 'gone'> {
    const { poolId } = pool.record;
    const kv = await this.deps.store.get(keys.pool(poolId));
    if (kv === undefined) return 'gone';
    const record: PoolRecord = { ...decodePool(kv), logical: name, users: [this.deps.host] };
    const countKv = await this.deps.store.get(keys.poolCount(poolId));
    const held = await this.deps.store.list(keys.addresses(poolId));
    const counts = new Map<bigint, number>();
    for (const a of held.kvs) {
      const start = pool.blockOf(parseAddress(decodeReservation(a).address).value);
      counts.set(start, (counts.get(start) ?? 0) + 1);
    }
    const blocks = [...counts].map(([start, count]) => ({
      start,
      block: { host: '', count, claimedAt: this.deps.now().toISOString() } satisfies BlockRecord,
    }));
    const res = await this.deps.store.txn({
      // Every reservation moves the count key: an unchanged count means the list is complete.
      compares: [modRevisionIs(keys.pool(poolId), kv.modRevision), modRevisionIs(keys.poolCount(poolId), countKv?.modRevision ?? 0)],
      success: [
        put(keys.pool(poolId), JSON.stringify(record)),
        del(keys.poolCount(poolId)),
        ...blocks.map((b) => put(keys.block(poolId, formatAddress(pool.prefix.family, b.start)), JSON.stringify(b.block))),
      ],
    });
    if (!res.succeeded) return 'moved';
    pool.record = record;
    for (const b of blocks) pool.setBlock(b.start, b.block, res.revision);
    return 'shared';
  }

  /** A free address of this host's blocks, claiming a block when they are full. */
  async allocate(pool: PoolState, record: (address: string) => Reservation): Promise<bigint | undefined> {
    for (let attempt = 0; attempt < MAX_RETRIES * 4; attempt++) {
      const pick = this.pick(pool);
      if (pick === undefined) return undefined;
      if ((await this.tryReserve(pool, pick.value, record, pick.claim)) === 'ok') return pick.value;
    }
    throw new OvsnetError('NOT_READY', `pool ${pool.record.pool} is under heavy contention; retry`);
  }

  /**
   * Reserves one given address (a gateway, or --ip anywhere in the pool) in whichever block
   * holds it. Returns the holder when the address is taken.
   */
  async reserve(pool: PoolState, value: bigint, record: (address: string) => Reservation): Promise<Reservation | undefined> {
    const r = await this.tryReserve(pool, value, record, false);
    if (r === 'ok' || r === 'lost') return undefined;
    // A logical network has one gateway, the same on every host: each host's Docker asks for it.
    return r.kind === 'gateway' && record(r.address).kind === 'gateway' ? undefined : r;
  }

  /**
   * The reservation record created if absent and its block's count moved, in one transaction.
   * `claim` makes this host the block's owner; 'lost' when another host claimed it first.
   */
  private async tryReserve(
    pool: PoolState,
    value: bigint,
    record: (address: string) => Reservation,
    claim: boolean,
  ): Promise<'ok' | 'lost' | Reservation> {
    const address = formatAddress(pool.prefix.family, value);
    const key = keys.address(pool.record.poolId, address);
    const start = pool.blockOf(value);
    const blockKey = keys.block(pool.record.poolId, formatAddress(pool.prefix.family, start));
    const me = this.deps.host;
    for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
      const state = pool.blocks.get(start);
      const current = state?.record;
      const owner = current?.host ?? '';
      if (claim && owner !== '' && owner !== me) return 'lost';
      const next: BlockRecord =
        claim && owner !== me
          ? { host: me, count: (current?.count ?? 0) + 1, claimedAt: this.deps.now().toISOString() }
          : { host: owner, count: (current?.count ?? 0) + 1, claimedAt: current?.claimedAt ?? this.deps.now().toISOString() };
      const res = await this.deps.store.txn({
        compares: [absent(key), this.blockIs(blockKey, state?.modRevision, current)],
        success: [put(key, JSON.stringify(record(address))), put(blockKey, JSON.stringify(next))],
        failure: [get(key), get(blockKey)],
      });
      if (res.succeeded) {
        pool.mark(value, true);
        pool.setBlock(start, next, res.revision);
        return 'ok';
      }
      const holder = res.gets[0];
      if (holder !== undefined) {
        pool.mark(value, true);
        return decodeReservation(holder);
      }
      this.refresh(pool, start, res.gets[1], res.revision);
    }
    throw new OvsnetError('NOT_READY', `pool ${pool.record.pool} is under heavy contention; retry`);
  }

  /**
   * Deletes this host's reservation and moves its block's count; an emptied block of ours goes
   * back. The gateway stays while another host uses the pool. Another host's reservation is left alone: after a dead host's addresses were reclaimed
   * and handed out again, its Docker's late release must not free the new holder's address.
   */
  async release(pool: PoolState, value: bigint, onlyIf?: (r: Reservation) => boolean): Promise<void> {
    const address = formatAddress(pool.prefix.family, value);
    const key = keys.address(pool.record.poolId, address);
    const start = pool.blockOf(value);
    const blockKey = keys.block(pool.record.poolId, formatAddress(pool.prefix.family, start));
    // The value this process wrote is compared instead of read (no round trip); a changed one
    // fails the compare and comes back in the failure's get.
    const written = onlyIf === undefined ? this.deps.written?.(key) : undefined;
    let held: KeyValue | undefined = written === undefined ? await this.deps.store.get(key) : undefined;
    for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
      const known = attempt === 0 ? written : undefined;
      if (held === undefined && known === undefined) {
        pool.mark(value, false);
        return; // not reserved: a second release moves nothing
      }
      const r = held === undefined ? (JSON.parse(known ?? '{}') as Reservation) : decodeReservation(held);
      if (r.host !== this.deps.host || (onlyIf !== undefined && !onlyIf(r))) return;
      // The shared gateway stays while another host's network uses the pool.
      if (r.kind === 'gateway' && (pool.record.users ?? []).some((u) => u !== this.deps.host)) return;
      const state = pool.blocks.get(start);
      const current = state?.record;
      const count = Math.max((current?.count ?? 1) - 1, 0);
      const goesBack = count === 0 && (current?.host === this.deps.host || current?.host === '' || current === undefined);
      const next: BlockRecord | undefined = goesBack || current === undefined ? undefined : { ...current, count };
      const ops: Op[] = [del(key), next === undefined ? del(blockKey) : put(blockKey, JSON.stringify(next))];
      const res = await this.deps.store.txn({
        compares: [
          held === undefined ? { key, target: 'value', op: '==', value: known ?? '' } : modRevisionIs(key, held.modRevision),
          this.blockIs(blockKey, state?.modRevision, current),
        ],
        success: ops,
        failure: [get(key), get(blockKey)],
      });
      if (res.succeeded) {
        pool.mark(value, false);
        pool.setBlock(start, next, res.revision);
        return;
      }
      held = res.gets[0];
      if (held === undefined) {
        pool.mark(value, false);
        return; // not reserved: a second release moves nothing
      }
      this.refresh(pool, start, res.gets[1], res.revision);
    }
    throw new OvsnetError('NOT_READY', `address ${address} of pool ${pool.record.pool} could not be released under contention; retry`);
  }

  /** This host's blocks with room first, then an unclaimed block, then any block with room. */
  private pick(pool: PoolState): Pick | undefined {
    const me = this.deps.host;
    for (const [start, b] of pool.blocks) {
      if (b.record?.host !== me) continue;
      const value = pool.freeIn(start);
      if (value !== undefined) return { value, start, claim: false };
    }
    let borrow: Pick | undefined;
    for (const start of pool.blockStarts(extraBlocks(pool))) {
      const owner = pool.blocks.get(start)?.record?.host;
      if (owner === me) continue;
      const value = pool.freeIn(start);
      if (value === undefined) continue;
      if (owner === undefined || owner === '') return { value, start, claim: true };
      borrow ??= { value, start, claim: false };
    }
    // Every block within reach is someone's: look through all of them for a free address.
    if (borrow === undefined) {
      for (const [start, b] of pool.blocks) {
        if (b.record === undefined || b.record.host === me) continue;
        const value = pool.freeIn(start);
        if (value !== undefined) return { value, start, claim: false };
      }
    }
    return borrow;
  }

  private blockIs(blockKey: string, modRevision: number | undefined, current: BlockRecord | undefined): Compare {
    return current === undefined || modRevision === undefined ? absent(blockKey) : modRevisionIs(blockKey, modRevision);
  }

  private refresh(pool: PoolState, start: bigint, kv: KeyValue | undefined, revision: number): void {
    pool.setBlock(start, kv === undefined ? undefined : decodeBlock(kv), kv?.modRevision ?? revision);
  }
}
