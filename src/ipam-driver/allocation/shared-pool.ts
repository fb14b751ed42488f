/**
 * Pools shared by a logical network across hosts: addresses are handed out from blocks (default
 * /26; `--ipam-opt ovsnet.block-size=N`). A host claims a block by compare-and-swap on its record
 * and takes addresses inside it; only the owner writes a block's record, so hosts never contend
 * on a shared count key; an emptied block goes back. Every address still has its reservation,
 * made by create-if-absent in the same transaction as the block's count: never handed out twice,
 * and `--ip` anywhere in the pool is checked against every host's. With no block free a host
 * borrows from another's block rather than fail while the pool has room. The count moves only
 * with a new reservation or a real release. docs/multi-host.md, "How it works", says more.
 */
import { OvsnetError } from '../../lib/errors.js';
import type { Compare, KeyValue, Store } from '../../store/types.js';
import { formatAddress, parseAddress } from '../../lib/cidr.js';
import type { AddressStrategy } from './one-host-pool.js';
import { judgedRelease, type Judge, type Released, type StrategyPart, type Written } from './judged-release.js';
import type { PoolState } from '../index/pool-index.js';
import type { BlockRecord, PoolRecord, Reservation } from '../state/records.js';
import { blockTxn, countTxn, poolTxn, reservationTxn } from '../state/ipam-txn.js';
import { listReservations, readCount, readPool } from '../state/ipam-reads.js';
import { keepsGateway } from './shared-gateway.js';

const MAX_RETRIES = 64;
/** How many blocks one search looks at: enough to find an unclaimed one past the claimed. */
const extraBlocks = (pool: PoolState) => pool.blocks.size + 2;

export interface SharedDeps {
  readonly store: Store;
  readonly host: string;
  readonly now: () => Date;
  /** What this process wrote last (bind-endpoint.ts RecentReservations): compared instead of read. */
  readonly written?: Written;
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
    const stored = await readPool(this.deps.store, poolId);
    if (stored === undefined) return 'gone';
    const record: PoolRecord = { ...stored.record, logical: name, users: [this.deps.host] };
    const count = await readCount(this.deps.store, poolId);
    const held = await listReservations(this.deps.store, poolId);
    const counts = new Map<bigint, number>();
    for (const r of held) {
      const start = pool.blockOf(parseAddress(r.address).value);
      counts.set(start, (counts.get(start) ?? 0) + 1);
    }
    const blocks = [...counts].map(([start, count]) => ({
      start,
      block: { host: '', count, claimedAt: this.deps.now().toISOString() } satisfies BlockRecord,
    }));
    const res = await this.deps.store.txn({
      // Every reservation moves the count key: an unchanged count means the list is complete.
      compares: [poolTxn.unchanged(poolId, stored.modRevision), countTxn.unchanged(poolId, count?.modRevision ?? 0)],
      success: [
        poolTxn.put(record),
        countTxn.del(poolId),
        ...blocks.map((b) => blockTxn.put(poolId, formatAddress(pool.prefix.family, b.start), b.block)),
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
    return r === 'ok' || r === 'lost' ? undefined : r;
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
    const { poolId } = pool.record;
    const address = formatAddress(pool.prefix.family, value);
    const start = pool.blockOf(value);
    const blockStart = formatAddress(pool.prefix.family, start);
    const me = this.deps.host;
    let made: Reservation | undefined;
    for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
      const state = pool.blocks.get(start);
      const current = state?.record;
      const owner = current?.host ?? '';
      if (claim && owner !== '' && owner !== me) return 'lost';
      made ??= record(address);
      const next: BlockRecord =
        claim && owner !== me
          ? { host: me, count: (current?.count ?? 0) + 1, claimedAt: this.deps.now().toISOString() }
          : { host: owner, count: (current?.count ?? 0) + 1, claimedAt: current?.claimedAt ?? this.deps.now().toISOString() };
      const res = await this.deps.store.txn({
        compares: [reservationTxn.absent(poolId, address), this.blockIs(poolId, blockStart, state?.modRevision, current)],
        success: [reservationTxn.put(made), blockTxn.put(poolId, blockStart, next)],
        failure: [reservationTxn.get(poolId, address), blockTxn.get(poolId, blockStart)],
      });
      if (res.succeeded) {
        pool.mark(value, true);
        pool.setBlock(start, next, res.revision);
        return 'ok';
      }
      const holder = reservationTxn.read(res.gets[0]);
      if (holder !== undefined) {
        pool.mark(value, true);
        return holder.record;
      }
      this.refresh(pool, start, res.gets[1], res.revision);
    }
    throw new OvsnetError('NOT_READY', `pool ${pool.record.pool} is under heavy contention; retry`);
  }

  /**
   * Deletes this host's reservation and moves its block's count; an emptied block of ours goes
   * back. The gateway stays while another network uses the pool (shared-gateway.ts). Another
   * host's reservation is left alone: after a dead host's addresses were reclaimed and handed out
   * again, its Docker's late release must not free the new holder's address.
   */
  release(pool: PoolState, value: bigint, onlyIf: Judge = () => true): Promise<Released> {
    const { poolId } = pool.record;
    const address = formatAddress(pool.prefix.family, value);
    const start = pool.blockOf(value);
    return judgedRelease(this.deps.store, this.deps.written, poolId, address, onlyIf, {
      part: (r, unchanged) => (r === undefined ? undefined : this.partOf(pool, value, r, unchanged)), // a malformed record: whose, unknown
      failure: [blockTxn.get(poolId, formatAddress(pool.prefix.family, start))],
      refresh: (res) => this.refresh(pool, start, res.gets[1], res.revision),
      free: () => pool.mark(value, false),
      what: `address ${address} of pool ${pool.record.pool}`,
    });
  }

  releasePart(pool: PoolState, value: bigint, json: string): StrategyPart | undefined {
    const address = formatAddress(pool.prefix.family, value);
    return this.partOf(pool, value, JSON.parse(json) as Reservation, reservationTxn.valueIs(pool.record.poolId, address, json));
  }

  /**
   * Deleting reservation `r` (as `unchanged` compares it) and moving its block's count, as one
   * transaction's parts; undefined when this host does not release it (another host's, a kept
   * gateway). An emptied block of ours goes back.
   */
  private partOf(pool: PoolState, value: bigint, r: Reservation, unchanged: Compare): StrategyPart | undefined {
    if (r.host !== this.deps.host) return undefined;
    if (r.kind === 'gateway' && keepsGateway(pool.record, this.deps.host)) return undefined;
    const { poolId } = pool.record;
    const start = pool.blockOf(value);
    const blockStart = formatAddress(pool.prefix.family, start);
    const state = pool.blocks.get(start);
    const current = state?.record;
    const count = Math.max((current?.count ?? 1) - 1, 0);
    const goesBack = count === 0 && (current?.host === this.deps.host || current?.host === '' || current === undefined);
    const next: BlockRecord | undefined = goesBack || current === undefined ? undefined : { ...current, count };
    return {
      compares: [unchanged, this.blockIs(poolId, blockStart, state?.modRevision, current)],
      success: [
        reservationTxn.del(poolId, formatAddress(pool.prefix.family, value)),
        next === undefined ? blockTxn.del(poolId, blockStart) : blockTxn.put(poolId, blockStart, next),
      ],
      applied: (revision) => {
        pool.mark(value, false);
        pool.setBlock(start, next, revision);
      },
    };
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

  private blockIs(poolId: string, start: string, modRevision: number | undefined, current: BlockRecord | undefined) {
    return blockTxn.unchanged(poolId, start, current === undefined ? undefined : modRevision);
  }

  private refresh(pool: PoolState, start: bigint, kv: KeyValue | undefined, revision: number): void {
    const seen = blockTxn.read(kv);
    pool.setBlock(start, seen.record, seen.modRevision ?? revision);
  }
}
