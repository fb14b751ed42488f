/**
 * Reclaiming what a dead host held in logical networks, after a grace period.
 *
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
import { keys, unpart } from '../../store/keys.js';
import { absent, del, modRevisionIs, put, type KeyValue, type Op, type Store } from '../../store/types.js';
import { blockSizeOf } from '../index/pool-index.js';
import { decodeAll, decodeRecord } from '../../store/decode.js';
import { decodeBlock, decodePool, decodeReservation, type PoolRecord, type Reservation } from '../state/records.js';

interface Departed {
  readonly host: string;
  readonly since: string;
}

/** The members of a logical network record (the driver owns that record; only names matter here). */
function membersOf(kv: KeyValue): Record<string, unknown> {
  return decodeRecord<{ members: Record<string, unknown> }>(kv.key, kv.value, (v) =>
    typeof v.members === 'object' && v.members !== null ? undefined : 'it has no members',
  ).members;
}

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
    const [pools, blocks, logical, departed] = await Promise.all([
      store.list(keys.pools),
      store.list(keys.allBlocks),
      store.list(keys.logicalNetworks),
      store.list(keys.departed),
    ]);
    const named = new Set<string>();
    for (const p of decodeAll(pools.kvs, decodePool)) for (const u of p.users ?? []) named.add(u);
    for (const b of decodeAll(blocks.kvs, decodeBlock)) named.add(b.host);
    for (const kv of logical.kvs) for (const m of Object.keys(membersOf(kv))) named.add(m);
    const gone = new Map(departed.kvs.map((kv) => [unpart(kv.key.slice(keys.departed.length)), decodeRecord<Departed>(kv.key, kv.value)]));
    const reclaimed: string[] = [];
    for (const host of named) {
      if (host === '' || host === this.deps.self || registered.has(host)) continue;
      const since = gone.get(host);
      if (since === undefined) {
        const record: Departed = { host, since: this.now().toISOString() };
        await store.txn({
          compares: [absent(keys.departedHost(host)), absent(keys.host(host))],
          success: [put(keys.departedHost(host), JSON.stringify(record))],
        });
        this.deps.log.warn(
          { host, graceSeconds: this.deps.graceMs / 1000 },
          'host gone: its addresses in logical networks are kept until the grace period ends',
        );
      } else if (this.now().getTime() - Date.parse(since.since) >= this.deps.graceMs) {
        await this.reclaim(host, pools.kvs, logical.kvs);
        reclaimed.push(host);
      }
    }
    // A departed host that registered again keeps what it has.
    for (const host of gone.keys()) {
      if (registered.has(host)) await store.txn({ compares: [], success: [del(keys.departedHost(host))] });
    }
    return reclaimed;
  }

  private async reclaim(host: string, pools: readonly KeyValue[], logical: readonly KeyValue[]): Promise<void> {
    let addresses = 0;
    for (const pool of decodeAll(pools, decodePool)) {
      if (pool.logical === undefined) continue;
      addresses += await this.reclaimPool(host, pool);
    }
    for (const kv of logical) {
      const name = unpart(kv.key.slice(keys.logicalNetworks.length));
      if (host in membersOf(kv)) await this.deps.leaveLogical(name, host);
    }
    await this.deps.store.txn({ compares: [absent(keys.host(host))], success: [del(keys.departedHost(host))] });
    this.deps.log.warn({ host, addresses }, "grace period over: reclaimed a dead host's blocks and addresses");
  }

  /** Per block, one transaction; then the host leaves the pool's users. Returns addresses freed. */
  private async reclaimPool(host: string, pool: PoolRecord): Promise<number> {
    const { store } = this.deps;
    const p = parsePrefix(pool.pool);
    const size = blockSizeOf(pool);
    const startOf = (value: bigint) => p.base + ((value - p.base) / size) * size;
    const held = decodeAll((await store.list(keys.addresses(pool.poolId))).kvs, decodeReservation);
    const theirs = new Map<string, Reservation[]>();
    for (const r of held) {
      if (r.host !== host || r.kind === 'gateway') continue;
      const start = formatAddress(p.family, startOf(parseAddress(r.address).value));
      theirs.set(start, [...(theirs.get(start) ?? []), r]);
    }
    const blocks = await store.list(keys.blocks(pool.poolId));
    for (const kv of blocks.kvs) {
      const start = unpart(kv.key.slice(keys.blocks(pool.poolId).length));
      if (decodeBlock(kv).host === host && !theirs.has(start)) theirs.set(start, []);
    }
    let freed = 0;
    for (const [start, list] of theirs) {
      const key = keys.block(pool.poolId, start);
      const kv = blocks.kvs.find((b) => b.key === key);
      const block = kv === undefined ? undefined : decodeBlock(kv);
      const count = Math.max((block?.count ?? list.length) - list.length, 0);
      const host2 = block?.host === host ? '' : (block?.host ?? '');
      const ops: Op[] = list.map((r) => del(keys.address(pool.poolId, r.address)));
      ops.push(
        count === 0 && host2 === ''
          ? del(key)
          : put(key, JSON.stringify({ host: host2, count, claimedAt: block?.claimedAt ?? this.now().toISOString() })),
      );
      const res = await store.txn({
        compares: [absent(keys.host(host)), kv === undefined ? absent(key) : modRevisionIs(key, kv.modRevision)],
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
