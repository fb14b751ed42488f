/**
 * Address management: pools and one reservation record per address in the store.
 *
 * - A reservation is made by one transaction: create-if-absent on the address key, and the
 *   pool's count moved from the value this process last saw (compare on its mod revision). A
 *   repeated request finds the key present and moves nothing; a release deletes the key and
 *   moves the count only if the key was there. So count == reservations, always (contiv's
 *   EpAddrCount rule), across processes sharing one store.
 * - Pool creation and release bump the address space's key; an overlap check is valid only if
 *   that key did not move in between, so two processes never create overlapping pools.
 * - The in-memory PoolIndex finds free addresses; a watch keeps it current with other
 *   processes' writes.
 */
import type { DefaultPool } from '../config.js';
import { OvsnetError } from '../errors.js';
import type { Logger } from '../log.js';
import { keys } from '../store/keys.js';
import { absent, del, get, modRevisionIs, put, type Compare, type Op, type Store, type Watcher } from '../store/types.js';
import { nextPool } from './carve.js';
import {
  CidrError,
  containsAddress,
  contains,
  defaultGateway,
  formatAddress,
  formatPrefix,
  formatWithLength,
  overlaps,
  parseAddress,
  parseCidr,
  size,
  type Family,
  type Prefix,
} from '../cidr.js';
import { PoolIndex, PoolState } from './pool-index.js';
import { describeHolder, parseRecord, type PoolRecord, type Reservation, type ReservationKind } from './records.js';

export const ADDRESS_SPACES = { local: 'LocalDefault', global: 'GlobalDefault' } as const;

/** `--ipam-opt` keys of ovsnet; other keys (Docker's own) pass through untouched. */
export const IPAM_OPTIONS: readonly string[] = [];

export interface IpamDeps {
  readonly store: Store;
  readonly log: Logger;
  readonly host: string;
  readonly defaultPools: readonly DefaultPool[];
  readonly hostRoutes: () => Prefix[];
  readonly now?: () => Date;
  /** How long a request waits for the first load of the index. */
  readonly readyTimeoutMs: number;
}

export interface PoolRequest {
  readonly addressSpace: string;
  readonly pool: string;
  readonly subPool: string;
  readonly options: Readonly<Record<string, string>>;
  readonly v6: boolean;
}

export interface AddressRequest {
  readonly poolId: string;
  readonly address: string;
  readonly gateway: boolean;
  /** Docker's endpoint name (v29+), for the reservation record. */
  readonly name?: string;
}

const MAX_RETRIES = 64;

/** A pool about to be created, and for a dynamic one the cursor move that goes with it. */
interface Chosen {
  readonly pool: Prefix;
  readonly sub?: Prefix;
  readonly cursor?: bigint;
  readonly cursorCompare?: readonly Compare[];
}

export class Ipam {
  private readonly index = new PoolIndex();
  private watcher: Watcher | undefined;
  private readyPromise: Promise<void> | undefined;
  /** True once the index is loaded and watched; false again while a lost watch is rebuilt. */
  private isReady = false;
  private stopped = false;
  private readonly now: () => Date;

  constructor(private readonly deps: IpamDeps) {
    this.now = deps.now ?? (() => new Date());
  }

  /** Loads the index and starts the watch in the background; requests wait for it. */
  start(): void {
    this.readyPromise ??= this.sync();
    this.readyPromise.catch((err: unknown) => {
      this.deps.log.warn({ err }, 'IPAM index not loaded yet; retrying');
      this.readyPromise = undefined;
      if (!this.stopped) setTimeout(() => this.start(), 1000).unref();
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.watcher?.close();
  }

  defaultAddressSpaces(): { local: string; global: string } {
    return { ...ADDRESS_SPACES };
  }

  async requestPool(req: PoolRequest): Promise<{ poolId: string; pool: string }> {
    const space = checkSpace(req.addressSpace);
    checkOptions(req.options);
    await this.ready();
    for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
      const spaceKv = await this.deps.store.get(keys.space(space));
      const existing = (await this.deps.store.list(keys.pools)).kvs.map((kv) => parseRecord<PoolRecord>(kv.value, 'pool'));
      const chosen: Chosen = req.pool === '' ? await this.choosePool(req.v6, existing) : this.checkPool(req, space, existing);
      const poolId = poolIdOf(space, chosen.pool, chosen.sub);
      const record: PoolRecord = {
        poolId,
        addressSpace: space,
        pool: formatPrefix(chosen.pool),
        ...(chosen.sub === undefined ? {} : { subPool: formatPrefix(chosen.sub) }),
        v6: chosen.pool.family === 6,
        dynamic: req.pool === '',
        options: { ...req.options },
        host: this.deps.host,
        createdAt: this.now().toISOString(),
      };
      const ops: Op[] = [put(keys.pool(poolId), JSON.stringify(record)), put(keys.space(space), String((spaceKv?.version ?? 0) + 1))];
      if (chosen.cursor !== undefined) ops.push(put(keys.poolCursor(chosen.pool.family), chosen.cursor.toString()));
      const res = await this.deps.store.txn({
        compares: [modRevisionIs(keys.space(space), spaceKv?.modRevision ?? 0), ...(chosen.cursorCompare ?? [])],
        success: ops,
      });
      if (res.succeeded) {
        this.index.apply({ type: 'put', kv: { key: keys.pool(poolId), value: JSON.stringify(record), createRevision: res.revision, modRevision: res.revision, version: 1, lease: '0' } });
        this.deps.log.info({ poolId, dynamic: record.dynamic }, 'pool requested');
        return { poolId, pool: record.pool };
      }
    }
    throw new OvsnetError('NOT_READY', 'pools are being created too fast by other hosts to pick one; retry the network creation');
  }

  async releasePool(poolId: string): Promise<void> {
    await this.ready();
    const kv = await this.deps.store.get(keys.pool(poolId));
    if (kv === undefined) return; // already released: idempotent
    const record = parseRecord<PoolRecord>(kv.value, 'pool');
    const spaceKey = keys.space(record.addressSpace);
    for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
      const spaceKv = await this.deps.store.get(spaceKey);
      const res = await this.deps.store.txn({
        compares: [modRevisionIs(spaceKey, spaceKv?.modRevision ?? 0), { key: keys.pool(poolId), target: 'present' }],
        success: [
          del(keys.pool(poolId)),
          { type: 'deletePrefix', prefix: keys.addresses(poolId) },
          del(keys.poolCount(poolId)),
          put(spaceKey, String((spaceKv?.version ?? 0) + 1)),
        ],
        failure: [get(keys.pool(poolId))],
      });
      if (res.succeeded || res.gets[0] === undefined) {
        this.index.pools.delete(poolId);
        if (res.succeeded) this.deps.log.info({ poolId }, 'pool released');
        return;
      }
    }
    throw new OvsnetError('NOT_READY', `pool ${poolId} could not be released while other pools change; Docker retries on the next network removal`);
  }

  async requestAddress(req: AddressRequest): Promise<{ address: string }> {
    await this.ready();
    const pool = await this.pool(req.poolId);
    const bits = pool.prefix.bits;
    if (req.gateway || req.address !== '') {
      const value = req.address === '' ? defaultGateway(pool.prefix) : this.checkAddress(pool, req.address, req.gateway);
      const kind: ReservationKind = req.gateway ? 'gateway' : 'static';
      const taken = await this.reserve(pool, value, kind, req.name);
      if (taken !== undefined) {
        throw new OvsnetError(
          'IPAM_ADDRESS_TAKEN',
          `address ${formatAddress(pool.prefix.family, value)} is already in use in pool ${pool.record.pool}: reserved by ${describeHolder(taken)}; choose another address or let ovsnet pick one`,
        );
      }
      return { address: formatWithLength(pool.prefix.family, value, bits) };
    }
    for (let attempt = 0; attempt < MAX_RETRIES * 16; attempt++) {
      const value = pool.candidate();
      if (value === undefined) break;
      pool.cursor = value + 1n;
      const taken = await this.reserve(pool, value, 'dynamic', req.name);
      if (taken === undefined) return { address: formatWithLength(pool.prefix.family, value, bits) };
    }
    const range = pool.record.subPool === undefined ? '' : ` (range ${pool.record.subPool})`;
    throw new OvsnetError(
      'IPAM_POOL_EXHAUSTED',
      `no free address in pool ${pool.record.pool}${range}: all ${pool.capacity} usable addresses are in use; remove containers or use a larger --subnet / --ip-range`,
    );
  }

  async releaseAddress(poolId: string, address: string): Promise<void> {
    await this.ready();
    const pool = this.index.pools.get(poolId) ?? (await this.loadPool(poolId));
    if (pool === undefined) return; // the pool is gone, and its reservations with it
    const value = this.parseIn(pool, address);
    const key = keys.address(poolId, formatAddress(pool.prefix.family, value));
    for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
      const next = pool.count - 1;
      const res = await this.deps.store.txn({
        compares: [{ key, target: 'present' }, modRevisionIs(keys.poolCount(poolId), pool.countRevision)],
        success: [del(key), put(keys.poolCount(poolId), String(next))],
        failure: [get(key), get(keys.poolCount(poolId))],
      });
      if (res.succeeded) {
        pool.mark(value, false);
        this.setCount(pool, next, res.revision);
        return;
      }
      if (res.gets[0] === undefined) {
        pool.mark(value, false);
        return; // not reserved: a second release moves nothing
      }
      this.refreshCount(pool, res.gets[1]);
    }
    throw new OvsnetError('NOT_READY', `address ${address} of pool ${poolId} could not be released under contention; retry`);
  }

  /** Pool usage, for status output and tests. */
  usage(): { poolId: string; pool: string; count: number; reserved: number; capacity: bigint }[] {
    return [...this.index.pools.values()].map((p) => ({
      poolId: p.record.poolId,
      pool: p.record.pool,
      count: p.count,
      reserved: p.reserved.count,
      capacity: p.capacity,
    }));
  }

  // --- internals -------------------------------------------------------------------------

  /** Creates the reservation; returns the holder when the address is taken. */
  private async reserve(pool: PoolState, value: bigint, kind: ReservationKind, name: string | undefined): Promise<Reservation | undefined> {
    const address = formatAddress(pool.prefix.family, value);
    const key = keys.address(pool.record.poolId, address);
    const countKey = keys.poolCount(pool.record.poolId);
    const record: Reservation = {
      address,
      poolId: pool.record.poolId,
      kind,
      host: this.deps.host,
      ...(name === undefined ? {} : { name }),
      reservedAt: this.now().toISOString(),
    };
    for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
      // The count written is the one compared: the watch may move pool.count during the await.
      const next = pool.count + 1;
      const res = await this.deps.store.txn({
        compares: [absent(key), modRevisionIs(countKey, pool.countRevision)],
        success: [put(key, JSON.stringify(record)), put(countKey, String(next))],
        failure: [get(key), get(countKey)],
      });
      if (res.succeeded) {
        pool.mark(value, true);
        this.setCount(pool, next, res.revision);
        return undefined;
      }
      const holder = res.gets[0];
      if (holder !== undefined) {
        pool.mark(value, true);
        return parseRecord<Reservation>(holder.value, 'reservation');
      }
      this.refreshCount(pool, res.gets[1]);
    }
    throw new OvsnetError('NOT_READY', `pool ${pool.record.pool} is under heavy contention; retry`);
  }

  private setCount(pool: PoolState, count: number, revision: number): void {
    if (revision >= pool.countRevision) {
      pool.count = count;
      pool.countRevision = revision;
    }
  }

  private refreshCount(pool: PoolState, kv: { value: string; modRevision: number } | undefined): void {
    pool.count = kv === undefined ? 0 : Number(kv.value);
    pool.countRevision = kv === undefined ? 0 : kv.modRevision;
  }

  private async pool(poolId: string): Promise<PoolState> {
    const pool = this.index.pools.get(poolId) ?? (await this.loadPool(poolId));
    if (pool === undefined) {
      throw new OvsnetError('IPAM_POOL_NOT_FOUND', `pool ${JSON.stringify(poolId)} does not exist: it was released, or was never requested from ovsnet`);
    }
    return pool;
  }

  /** A pool another process created that the watch has not delivered yet. */
  private async loadPool(poolId: string): Promise<PoolState | undefined> {
    const snapshot = await this.deps.store.list(`${keys.addresses(poolId)}`);
    const kv = await this.deps.store.get(keys.pool(poolId));
    if (kv === undefined) return undefined;
    const pool = this.index.pools.get(poolId) ?? new PoolState(parseRecord<PoolRecord>(kv.value, 'pool'));
    this.index.pools.set(poolId, pool);
    for (const a of snapshot.kvs) pool.mark(parseAddress(parseRecord<Reservation>(a.value, 'reservation').address).value, true);
    this.refreshCount(pool, await this.deps.store.get(keys.poolCount(poolId)));
    return pool;
  }

  private parseIn(pool: PoolState, address: string): bigint {
    let parsed: { family: Family; value: bigint };
    try {
      if (address.includes('/')) {
        const c = parseCidr(address);
        parsed = { family: c.family, value: c.address };
      } else {
        parsed = parseAddress(address);
      }
    } catch (err) {
      throw new OvsnetError('IPAM_ADDRESS_INVALID', err instanceof CidrError ? err.message : String(err));
    }
    if (!containsAddress(pool.prefix, parsed.family, parsed.value)) {
      throw new OvsnetError('IPAM_ADDRESS_INVALID', `address ${address} is not in pool ${pool.record.pool}: pick one inside it`);
    }
    return parsed.value;
  }

  private checkAddress(pool: PoolState, address: string, gateway: boolean): bigint {
    const value = this.parseIn(pool, address);
    const hostBits = (pool.prefix.family === 4 ? 32 : 128) - pool.prefix.bits;
    if (hostBits >= 2 && !gateway && value === pool.prefix.base) {
      throw new OvsnetError('IPAM_ADDRESS_INVALID', `address ${address} is the network address of ${pool.record.pool}; pick one from ${formatAddress(pool.prefix.family, pool.prefix.base + 1n)} on`);
    }
    if (hostBits >= 2 && pool.prefix.family === 4 && value === pool.prefix.base + size(pool.prefix) - 1n) {
      throw new OvsnetError('IPAM_ADDRESS_INVALID', `address ${address} is the broadcast address of ${pool.record.pool}; pick one below it`);
    }
    return value;
  }

  private checkPool(req: PoolRequest, space: string, existing: readonly PoolRecord[]): Chosen {
    const pool = parsePool(req.pool, 'Pool');
    if ((pool.family === 6) !== req.v6) {
      throw new OvsnetError('IPAM_POOL_INVALID', `pool ${req.pool} is IPv${pool.family} but the request is for IPv${req.v6 ? 6 : 4}`);
    }
    if (pool.family === 6 && pool.bits > 64) {
      throw new OvsnetError('IPAM_POOL_INVALID', `IPv6 pool ${req.pool} is too small: ovsnet takes IPv6 pools of /64 or larger (a shorter prefix)`);
    }
    let sub: Prefix | undefined;
    if (req.subPool !== '') {
      sub = parsePool(req.subPool, 'SubPool (--ip-range)');
      if (!contains(pool, sub)) {
        throw new OvsnetError('IPAM_POOL_INVALID', `--ip-range ${req.subPool} is not inside --subnet ${formatPrefix(pool)}: give a range within the subnet`);
      }
    }
    for (const other of existing) {
      if (other.addressSpace === space && overlaps(pool, parseCidr(other.pool))) {
        throw new OvsnetError(
          'IPAM_POOL_OVERLAP',
          `pool ${formatPrefix(pool)} overlaps pool ${other.pool} (${other.poolId}) already in use in address space ${space}: choose a subnet that overlaps no other network's`,
        );
      }
    }
    return sub === undefined ? { pool } : { pool, sub };
  }

  private async choosePool(v6: boolean, existing: readonly PoolRecord[]): Promise<Chosen> {
    const family: Family = v6 ? 6 : 4;
    const cursorKv = await this.deps.store.get(keys.poolCursor(family));
    const taken = [...existing.map((r) => parseCidr(r.pool)), ...this.deps.hostRoutes()];
    const found = nextPool(this.deps.defaultPools, family, BigInt(cursorKv?.value ?? '0'), taken);
    if (found === undefined) {
      const ranges = this.deps.defaultPools.filter((p) => p.range.family === family).map((p) => `${formatPrefix(p.range)}:${p.bits}`);
      throw new OvsnetError(
        'IPAM_NO_FREE_POOL',
        ranges.length === 0
          ? `no IPv${family} default pool is configured: pass --subnet, or add an IPv${family} range to OVSNET_DEFAULT_POOLS`
          : `every pool of OVSNET_DEFAULT_POOLS (${ranges.join(',')}) overlaps a network or a host route: pass --subnet, or add ranges`,
      );
    }
    return { pool: found.prefix, cursor: found.next, cursorCompare: [modRevisionIs(keys.poolCursor(family), cursorKv?.modRevision ?? 0)] };
  }

  private async ready(): Promise<void> {
    if (this.isReady) return;
    if (this.readyPromise === undefined) this.start();
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.readyPromise,
        new Promise((_, reject) => {
          timer = setTimeout(
            () => reject(new OvsnetError('NOT_READY', `ovsnet has not reached its store yet (waited ${this.deps.readyTimeoutMs} ms); Docker can retry`)),
            this.deps.readyTimeoutMs,
          );
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  private async sync(): Promise<void> {
    const snapshot = await this.deps.store.list(keys.ipam);
    this.index.load(snapshot.kvs);
    await this.watcher?.close();
    this.watcher = await this.deps.store.watch(keys.ipam, snapshot.revision + 1, {
      onEvents: (events) => events.forEach((e) => this.index.apply(e)),
      onError: (err) => {
        if (this.stopped) return;
        this.deps.log.warn({ err }, 'IPAM watch ended; reloading');
        this.isReady = false;
        this.readyPromise = undefined;
        this.start();
      },
    });
    this.isReady = true;
    this.deps.log.info({ pools: this.index.pools.size, revision: snapshot.revision }, 'IPAM index loaded');
  }
}

export function poolIdOf(space: string, pool: Prefix, sub: Prefix | undefined): string {
  return `${space}/${formatPrefix(pool)}${sub === undefined ? '' : `/${formatPrefix(sub)}`}`;
}

function checkSpace(space: string): string {
  if (space === '') return ADDRESS_SPACES.local;
  if (space !== ADDRESS_SPACES.local && space !== ADDRESS_SPACES.global) {
    throw new OvsnetError('IPAM_ADDRESS_SPACE_INVALID', `address space ${JSON.stringify(space)} is not one of ovsnet's: ${ADDRESS_SPACES.local}, ${ADDRESS_SPACES.global}`);
  }
  return space;
}

function checkOptions(options: Readonly<Record<string, string>>): void {
  for (const key of Object.keys(options)) {
    if (key.startsWith('ovsnet.') && !IPAM_OPTIONS.includes(key)) {
      const valid = IPAM_OPTIONS.length === 0 ? 'ovsnet IPAM takes no ovsnet.* options in this version' : `valid ones: ${IPAM_OPTIONS.join(', ')}`;
      throw new OvsnetError('IPAM_OPTION_INVALID', `--ipam-opt ${key} is not an ovsnet IPAM option: ${valid}`);
    }
  }
}

function parsePool(text: string, field: string): Prefix {
  try {
    const p = parseCidr(text);
    return { family: p.family, base: p.base, bits: p.bits };
  } catch (err) {
    throw new OvsnetError('IPAM_POOL_INVALID', `${field}: ${err instanceof CidrError ? err.message : String(err)}`);
  }
}
