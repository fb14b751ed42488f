/**
 * Reclaiming what a dead host held in logical networks, after a grace period.
 * A host whose registration vanished may still have running containers (its ovsnet died, or
 * it lost the store): its addresses must not be handed out again at once. Every live host
 * sweeps periodically: a host named by a block, a shared pool or a logical network but not
 * registered gets a `departed` record with the time it was first seen gone (create-if-absent,
 * so the earliest sighting counts). Once the grace period has passed since then, its dynamic
 * and static reservations in shared pools are deleted and its blocks given back, each block in
 * one transaction that also checks the host has not registered again; then it leaves the pools'
 * users and the logical networks' members. A host that comes back before the grace period ends
 * keeps everything (its registration removes the departed record).
 */
import { messageOf } from '../../lib/errors.js';
import { Repeater } from '../../lib/timers.js';
import type { Logger } from '../../lib/log.js';
import { formatAddress, parseAddress, prefix as parsePrefix } from '../../lib/cidr.js';
import type { Op, Store } from '../../store/types.js';
import { blockSizeOf } from '../index/pool-index.js';
import type { PoolRecord, Reservation } from '../state/records.js';
import { listBlocks, listPools, listReservations } from '../state/ipam-reads.js';
import { blockTxn, reservationTxn } from '../state/ipam-txn.js';
import { departedTxn, listDeparted, listLogicalMembers, type Departed } from '../state/departed.js';

export interface ReclaimDeps {
  readonly store: Store;
  readonly log: Logger;
  readonly self: string;
  /** Registered hosts; undefined until the registry has loaded them. */
  readonly hosts: () => ReadonlySet<string> | undefined;
  readonly graceMs: number;
  /** Removes a reclaimed host from the logical networks' members. */
  readonly leaveLogical: (name: string, host: string) => Promise<void>;
  /** Removes a reclaimed host from a shared pool's users (the last one removes the pool). */
  readonly leavePool: (poolId: string, host: string) => Promise<void>;
  readonly now?: () => Date;
}

export class Reclaimer {
  private readonly repeater = new Repeater();
  private readonly now: () => Date;

  constructor(private readonly deps: ReclaimDeps) {
    this.now = deps.now ?? (() => new Date());
  }

  start(intervalMs: number): void {
    this.repeater.start(
      intervalMs,
      () => this.sweep(),
      (err) => this.deps.log.warn({ err }, `reclaim sweep failed: ${messageOf(err)}`),
    );
  }

  stop(): void {
    this.repeater.stop();
  }

  /** One pass; returns the hosts reclaimed. */
  async sweep(): Promise<string[]> {
    const registered = this.deps.hosts();
    if (registered === undefined) return [];
    const { store } = this.deps;
    const [listed, blocks, logical, gone] = await Promise.all([
      listPools(store),
      listBlocks(store),
      listLogicalMembers(store),
      listDeparted(store),
    ]);
    const pools = listed.map((p) => p.record);
    const named = new Set<string>();
    for (const p of pools) for (const u of p.users ?? []) named.add(u);
    for (const b of blocks) named.add(b.block.record.host);
    for (const l of logical) for (const m of l.members) named.add(m);
    const reclaimed: string[] = [];
    for (const host of named) {
      if (host === '' || host === this.deps.self || registered.has(host)) continue;
      const since = gone.get(host);
      if (since === undefined) {
        const record: Departed = { host, since: this.now().toISOString() };
        await store.txn({ compares: [departedTxn.noted(host), departedTxn.unregistered(host)], success: [departedTxn.put(record)] });
        this.deps.log.warn(
          { host, graceSeconds: this.deps.graceMs / 1000 },
          'host gone: its addresses in logical networks are kept until the grace period ends',
        );
      } else if (this.now().getTime() - Date.parse(since.since) >= this.deps.graceMs) {
        await this.reclaim(host, pools, logical);
        reclaimed.push(host);
      }
    }
    // A departed host that registered again keeps what it has.
    for (const host of gone.keys()) {
      if (registered.has(host)) await store.txn({ compares: [], success: [departedTxn.del(host)] });
    }
    return reclaimed;
  }

  private async reclaim(
    host: string,
    pools: readonly PoolRecord[],
    logical: readonly { name: string; members: string[] }[],
  ): Promise<void> {
    let addresses = 0;
    for (const pool of pools) {
      if (pool.logical === undefined) continue;
      addresses += await this.reclaimPool(host, pool);
    }
    for (const { name, members } of logical) {
      if (members.includes(host)) await this.deps.leaveLogical(name, host);
    }
    await this.deps.store.txn({ compares: [departedTxn.unregistered(host)], success: [departedTxn.del(host)] });
    this.deps.log.warn({ host, addresses }, "grace period over: reclaimed a dead host's blocks and addresses");
  }

  /** Per block, one transaction; then the host leaves the pool's users. Returns addresses freed. */
  private async reclaimPool(host: string, pool: PoolRecord): Promise<number> {
    const { store } = this.deps;
    const p = parsePrefix(pool.pool);
    const size = blockSizeOf(pool);
    const startOf = (value: bigint) => p.base + ((value - p.base) / size) * size;
    const held = await listReservations(store, pool.poolId);
    const theirs = new Map<string, Reservation[]>();
    for (const r of held) {
      if (r.host !== host || r.kind === 'gateway') continue;
      const start = formatAddress(p.family, startOf(parseAddress(r.address).value));
      theirs.set(start, [...(theirs.get(start) ?? []), r]);
    }
    const blocks = await listBlocks(store, pool.poolId);
    for (const b of blocks) {
      if (b.block.record.host === host && !theirs.has(b.start)) theirs.set(b.start, []);
    }
    let freed = 0;
    for (const [start, list] of theirs) {
      const stored = blocks.find((b) => b.start === start)?.block;
      const block = stored?.record;
      const count = Math.max((block?.count ?? list.length) - list.length, 0);
      const host2 = block?.host === host ? '' : (block?.host ?? '');
      const ops: Op[] = list.map((r) => reservationTxn.del(pool.poolId, r.address));
      ops.push(
        count === 0 && host2 === ''
          ? blockTxn.del(pool.poolId, start)
          : blockTxn.put(pool.poolId, start, { host: host2, count, claimedAt: block?.claimedAt ?? this.now().toISOString() }),
      );
      const res = await store.txn({
        compares: [departedTxn.unregistered(host), blockTxn.unchanged(pool.poolId, start, stored?.modRevision)],
        success: ops,
      });
      if (res.succeeded) freed += list.length;
      // A block that moved meanwhile is retried on the next sweep (the departed record stays).
      else throw new Error(`block ${start} of pool ${pool.pool} changed while reclaiming host ${host}; the next sweep retries`);
    }
    await this.deps.leavePool(pool.poolId, host);
    return freed;
  }
}
