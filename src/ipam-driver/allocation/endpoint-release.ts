/**
 * DeleteEndpoint frees the endpoint's addresses in its own transaction, and Docker's
 * ReleaseAddress right after it costs no store call (state/tombstones.ts says how the two meet).
 * The release rides in the driver's transaction only when this process knows the reservation
 * exactly as stored and bound to that endpoint (bind-endpoint.ts RecentReservations): the
 * compares check the stored value and the pool's count or block, so a reservation changed since
 * fails them, nothing is freed, and the driver deletes its record alone (ReleaseAddress then
 * releases the usual way). A CNI attachment's address, a kept gateway and another host's
 * reservation never go this way. A sticky pool's record of the holder's last address is
 * written in the same transaction.
 */
import { formatAddress, parseAddress } from '../../lib/cidr.js';
import type { Compare, Op, Store } from '../../store/types.js';
import { Repeater } from '../../lib/timers.js';
import type { Logger } from '../../lib/log.js';
import { messageOf } from '../../lib/errors.js';
import type { HolderIndex } from '../index/holder-index.js';
import type { PoolState } from '../index/pool-index.js';
import { holderOf, releasableByDocker, stickyKeyOf } from '../state/holder-keys.js';
import type { Reservation } from '../state/records.js';
import { stickyTxn } from '../state/ipam-txn.js';
import { Tombstones, tombstoneTxn } from '../state/tombstones.js';
import { isSticky } from './allocator.js';
import type { RecentReservations } from './bind-endpoint.js';
import type { AddressStrategy } from './one-host-pool.js';

/** Compares and writes for DeleteEndpoint's transaction; `done` with its outcome. */
export interface ReleaseOps {
  readonly compares: readonly Compare[];
  readonly success: readonly Op[];
  done(succeeded: boolean, revision: number): void;
}

export interface EndpointReleaseDeps {
  readonly store: Store;
  readonly log: Logger;
  readonly host: string;
  readonly now: () => Date;
  readonly holders: HolderIndex;
  readonly recent: RecentReservations;
  /** The loaded pools holding the address (plain form); undefined while the index is not loaded. */
  readonly poolsHolding: (address: string) => readonly PoolState[] | undefined;
  readonly strategy: (pool: PoolState) => AddressStrategy;
}

/** How often expired tombstones are swept in a transaction of their own. */
const SWEEP_EVERY_MS = 60_000;
/**
 * How long a consumed tombstone waits for a transaction that runs anyway (the next
 * DeleteEndpoint's) before one of its own deletes it: a storm's releases are swept by the storm's
 * own DeleteEndpoints, its last few by one transaction this long after.
 */
const SWEEP_SOON_MS = 1000;

export class EndpointRelease {
  readonly tombstones: Tombstones;
  private loaded: Promise<void> | undefined;
  private stopped = false;
  private soon: NodeJS.Timeout | undefined;
  private readonly sweeper = new Repeater();

  constructor(private readonly deps: EndpointReleaseDeps) {
    this.tombstones = new Tombstones(deps.host, deps.now);
  }

  /** Reads this host's tombstones once (start-up) and starts the periodic sweep; a failed read is tried again by the next call. */
  load(): Promise<void> {
    const loading = (this.loaded ??= this.tombstones.load(this.deps.store).then(
      () => {
        if (this.stopped) return;
        this.sweeper.start(
          SWEEP_EVERY_MS,
          () => this.sweep(),
          () => undefined,
        );
      },
      (err: unknown) => {
        this.loaded = undefined;
        throw err;
      },
    ));
    return loading;
  }

  /** Stops the sweeps, after one for what was consumed (a restart would otherwise take it as live again). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.sweeper.stop();
    clearTimeout(this.soon);
    await this.sweep();
  }

  /** The release of `address` (plain or CIDR form) bound to `endpointId`, for DeleteEndpoint's transaction; undefined when it cannot ride there. */
  ops(address: string, endpointId: string): ReleaseOps | undefined {
    const plain = address.split('/')[0] ?? '';
    for (const pool of this.deps.poolsHolding(plain) ?? []) {
      const { poolId } = pool.record;
      const json = this.deps.recent.peek(poolId, plain);
      if (json === undefined) continue;
      const r = JSON.parse(json) as Reservation;
      if (r.endpoint !== endpointId || !releasableByDocker(holderOf(r))) return undefined;
      const value = parseAddress(plain).value;
      const part = this.deps.strategy(pool).releasePart(pool, value, json);
      if (part === undefined) return undefined;
      const now = this.deps.now().toISOString();
      const tombstone = { poolId, address: plain, endpoint: endpointId, host: this.deps.host, at: now };
      const sticky = isSticky(pool) ? stickyKeyOf(r) : undefined;
      const sweep = this.tombstones.sweep();
      return {
        compares: part.compares,
        success: [
          ...part.success,
          tombstoneTxn.put(tombstone),
          ...(sticky === undefined ? [] : [stickyTxn.put(poolId, sticky, { address: plain, releasedAt: now })]),
          ...sweep.ops,
        ],
        done: (succeeded, revision) => {
          if (!succeeded) return sweep.failed();
          part.applied(revision);
          this.deps.holders.forget(poolId, plain);
          this.deps.recent.take(poolId, plain);
          this.tombstones.add(tombstone);
        },
      };
    }
    return undefined;
  }

  /** Docker's ReleaseAddress of an address DeleteEndpoint already freed: true (consumed, nothing to do). */
  async consume(poolId: string, address: string): Promise<boolean> {
    await this.load();
    let canonical: string;
    try {
      const { family, value } = parseAddress(address.split('/')[0] ?? '');
      canonical = formatAddress(family, value);
    } catch {
      return false; // not an address: the usual release says what is wrong
    }
    if (!this.tombstones.take(poolId, canonical)) return false;
    this.soon ??= setTimeout(() => {
      this.soon = undefined;
      void this.sweep();
    }, SWEEP_SOON_MS).unref();
    return true;
  }

  private async sweep(): Promise<void> {
    await this.tombstones.sweepNow(this.deps.store).catch((err) => this.deps.log.warn({ err }, `tombstone sweep: ${messageOf(err)}`));
  }

  /** A released pool: its tombstones went with its keys. */
  forgetPool(poolId: string): void {
    this.tombstones.forgetPool(poolId);
  }
}
