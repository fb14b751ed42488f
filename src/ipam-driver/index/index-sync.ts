/**
 * Keeps the pool index (pool-index.ts) current with the store. A Follower (src/store/follow.ts)
 * loads one snapshot of IPAM's keys into it and applies the watch's events after; when the
 * watch ends, the index is not ready until the Follower's new snapshot (taken at once) replaces
 * it: a request meanwhile waits for that, as for the first load (ready()), rather than pick an
 * address from an index that may miss another process's writes. A first load that fails is
 * retried every second.
 *
 * A pool another process created that the watch has not delivered yet is read on demand
 * (loadPool). A reservation this process wrote comes back with the rest and is applied from the
 * record written, not decoded again (own-reservations.ts).
 */
import { OvsnetError } from '../../lib/errors.js';
import type { Logger } from '../../lib/log.js';
import { Follower } from '../../store/follow.js';
import type { Store } from '../../store/types.js';
import { parseAddress } from '../../lib/cidr.js';
import { PoolState, refreshCount, type PoolIndex } from './pool-index.js';
import { IPAM_PREFIX } from '../state/ipam-keys.js';
import { listReservations, readCount, readPool } from '../state/ipam-reads.js';
import type { HolderIndex } from './holder-index.js';
import { OwnReservations } from './own-reservations.js';

export interface IndexSyncDeps {
  readonly store: Store;
  readonly log: Logger;
  /** How long a request waits for the first load of the index. */
  readonly readyTimeoutMs: number;
}

const FIRST_LOAD_RETRY_MS = 1000;

export class IndexSync {
  private readonly follower: Follower;
  /** The reservations this process writes: their events are applied without decoding (own-reservations.ts). */
  readonly own = new OwnReservations();
  /** The first load under way (undefined before it starts and after it failed). */
  private loading: Promise<void> | undefined;
  private loaded = false;
  /** Requests waiting for the index to be loaded again after a lost watch. */
  private readonly waiting: (() => void)[] = [];
  private stopped = false;
  private retry: NodeJS.Timeout | undefined;
  /** The watch ended after the first load; the Follower is loading the index again. */
  private lost = false;

  constructor(
    private readonly index: PoolIndex,
    private readonly deps: IndexSyncDeps,
    /** Holders, fed by the same snapshot and watch (holder-index.ts). */
    holders?: HolderIndex,
  ) {
    this.follower = new Follower({
      store: deps.store,
      prefix: IPAM_PREFIX,
      log: deps.log,
      what: 'IPAM pools and addresses',
      onSnapshot: (kvs) => {
        index.load(kvs);
        holders?.load(kvs);
        deps.log.info({ pools: index.pools.size }, 'IPAM index loaded');
        // A reload after a lost watch: ready again (the first load is ready once watched).
        if (this.lost) this.markLoaded();
      },
      onEvents: (events) =>
        events.forEach((e) => {
          const mine = e.type === 'put' ? this.own.take(e.kv.key, e.kv.value) : undefined;
          if (mine !== undefined) {
            index.applyReservation(e.kv.key, mine);
            holders?.note(mine);
            return;
          }
          index.apply(e);
          holders?.apply(e);
        }),
      onLost: () => {
        this.loaded = false;
        this.lost = true;
      },
      againAtOnce: true,
    });
  }

  /** True once the first snapshot is loaded and watched; false again while a lost watch is rebuilt. */
  get isReady(): boolean {
    return this.loaded;
  }

  /** Starts the first load in the background (idempotent); ready() waits for it. */
  start(): void {
    if (this.loading !== undefined || this.loaded || this.lost) return;
    this.loading = this.follower.start().then(() => this.markLoaded());
    this.loading.catch((err: unknown) => {
      this.deps.log.warn({ err }, 'IPAM index not loaded yet; retrying');
      this.loading = undefined;
      if (!this.stopped) this.retry = setTimeout(() => this.start(), FIRST_LOAD_RETRY_MS).unref();
    });
  }

  /** Resolves once the index is loaded; NOT_READY after readyTimeoutMs, or the load's error. */
  async ready(): Promise<void> {
    if (this.loaded) return;
    this.start();
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        ...(this.lost ? [] : [this.loading]),
        new Promise<void>((resolve) => this.waiting.push(resolve)),
        new Promise((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new OvsnetError(
                  'NOT_READY',
                  `ovsnet has not reached its store yet (waited ${this.deps.readyTimeoutMs} ms); Docker can retry`,
                ),
              ),
            this.deps.readyTimeoutMs,
          );
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  private markLoaded(): void {
    this.loaded = true;
    this.lost = false;
    for (const resolve of this.waiting.splice(0)) resolve();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    await this.follower.stop();
  }

  /** A pool another process created that the watch has not delivered yet; undefined if none. */
  async loadPool(poolId: string): Promise<PoolState | undefined> {
    const { store } = this.deps;
    const reserved = await listReservations(store, poolId);
    const stored = await readPool(store, poolId);
    if (stored === undefined) return undefined;
    const pool = this.index.pools.get(poolId) ?? new PoolState(stored.record);
    this.index.pools.set(poolId, pool);
    for (const r of reserved) pool.mark(parseAddress(r.address).value, true);
    refreshCount(pool, await readCount(store, poolId));
    return pool;
  }
}
