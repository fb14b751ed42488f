/**
 * Addresses of a one-host pool: each reservation record created if absent, and the pool's
 * count moved from the value this process last saw (compare on its mod revision), in one
 * transaction. A repeated request finds the key present and moves nothing; a release deletes
 * the key and moves the count only if the key was there. So count == reservations, always
 * (contiv's EpAddrCount rule), across processes sharing one store. Shared pools (shared-pool.ts)
 * do the same per block.
 */
import { OvsnetError } from '../../lib/errors.js';
import type { Compare, Store } from '../../store/types.js';
import { formatAddress } from '../../lib/cidr.js';
import { refreshCount, type PoolState } from '../index/pool-index.js';
import type { Reservation } from '../state/records.js';
import { countTxn, reservationTxn } from '../state/ipam-txn.js';
import { judgedRelease, type Judge, type Released, type StrategyPart, type Written } from './judged-release.js';

export type { StrategyPart } from './judged-release.js';

const MAX_RETRIES = 64;

/** What Ipam asks of either kind of pool. */
export interface AddressStrategy {
  /** Reserves a given address; returns the holder when it is taken. */
  reserve(pool: PoolState, value: bigint, record: (address: string) => Reservation): Promise<Reservation | undefined>;
  /** Reserves a free address of the dynamic range; undefined when there is none. */
  allocate(pool: PoolState, record: (address: string) => Reservation): Promise<bigint | undefined>;
  /** Releases; with `onlyIf`, only a reservation that passes it, judged as its transaction compares it (judged-release.ts). Idempotent. */
  release(pool: PoolState, value: bigint, onlyIf?: Judge): Promise<Released>;
  /**
   * The release of a reservation stored exactly as `json` (what this process wrote) as compares
   * and writes for the caller's transaction; `applied` once it succeeded. Undefined when this
   * strategy would not release it (another host's, a kept gateway).
   */
  releasePart(pool: PoolState, value: bigint, json: string): StrategyPart | undefined;
}

function setCount(pool: PoolState, count: number, revision: number): void {
  if (revision >= pool.countRevision) {
    pool.count = count;
    pool.countRevision = revision;
  }
}

export class OneHostPools implements AddressStrategy {
  constructor(
    private readonly store: Store,
    /** What this process wrote last (bind-endpoint.ts RecentReservations): compared instead of read. */
    private readonly written?: Written,
  ) {}

  async allocate(pool: PoolState, record: (address: string) => Reservation): Promise<bigint | undefined> {
    for (let attempt = 0; attempt < MAX_RETRIES * 16; attempt++) {
      const value = pool.candidate();
      if (value === undefined) return undefined;
      pool.cursor = value + 1n;
      if ((await this.reserve(pool, value, record)) === undefined) return value;
    }
    return undefined;
  }

  async reserve(pool: PoolState, value: bigint, record: (address: string) => Reservation): Promise<Reservation | undefined> {
    const address = formatAddress(pool.prefix.family, value);
    const { poolId } = pool.record;
    const made = record(address);
    for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
      // The count written is the one compared: the watch may move pool.count during the await.
      const next = pool.count + 1;
      const res = await this.store.txn({
        compares: [reservationTxn.absent(poolId, address), countTxn.unchanged(poolId, pool.countRevision)],
        success: [reservationTxn.put(made), countTxn.put(poolId, next)],
        failure: [reservationTxn.get(poolId, address), countTxn.get(poolId)],
      });
      if (res.succeeded) {
        pool.mark(value, true);
        setCount(pool, next, res.revision);
        return undefined;
      }
      const holder = reservationTxn.read(res.gets[0]);
      if (holder !== undefined) {
        pool.mark(value, true);
        return holder.record;
      }
      refreshCount(pool, countTxn.read(res.gets[1]));
    }
    throw new OvsnetError('NOT_READY', `pool ${pool.record.pool} is under heavy contention; retry`);
  }

  releasePart(pool: PoolState, value: bigint, json: string): StrategyPart {
    return this.partOf(pool, value, reservationTxn.valueIs(pool.record.poolId, formatAddress(pool.prefix.family, value), json));
  }

  release(pool: PoolState, value: bigint, onlyIf: Judge = () => true): Promise<Released> {
    const { poolId } = pool.record;
    const address = formatAddress(pool.prefix.family, value);
    return judgedRelease(this.store, this.written, poolId, address, onlyIf, {
      part: (_r, unchanged) => this.partOf(pool, value, unchanged),
      failure: [countTxn.get(poolId)],
      refresh: (res) => refreshCount(pool, countTxn.read(res.gets[1])),
      free: () => pool.mark(value, false),
      what: `address ${address} of pool ${poolId}`,
    });
  }

  /** Deleting the reservation (as `unchanged` compares it) and moving the count. */
  private partOf(pool: PoolState, value: bigint, unchanged: Compare): StrategyPart {
    const { poolId } = pool.record;
    const next = pool.count - 1;
    return {
      compares: [unchanged, countTxn.unchanged(poolId, pool.countRevision)],
      success: [reservationTxn.del(poolId, formatAddress(pool.prefix.family, value)), countTxn.put(poolId, next)],
      applied: (revision) => {
        pool.mark(value, false);
        setCount(pool, next, revision);
      },
    };
  }
}
