/**
 * Address management: pools and one reservation record per address in the store. A reservation
 * is one transaction: create-if-absent on the address key and a count moved by compare-and-swap,
 * so count == reservations, always (contiv's EpAddrCount rule), across processes and hosts. Rooms:
 * state/ alone builds IPAM's keys (typed reads, transaction parts); index/ finds free addresses
 * (index-sync.ts follows other processes' writes); allocation/ reserves and releases
 * (one-host-pool.ts, shared-pool.ts, one release path in release.ts); pools/ creates and checks
 * pools; recovery/ reaps, reclaims and settles what the store did not confirm.
 */
import { randomBytes } from 'node:crypto';
import { OvsnetError, isOvsnetError } from '../lib/errors.js';
import { containsAddress, parseAddress } from '../lib/cidr.js';
import { PoolIndex, type PoolState } from './index/pool-index.js';
import { ADDRESS_SPACES, Pools, type PoolRequest } from './pools/pools.js';
import type { IpamDeps } from './ipam-deps.js';
import { poolUsableBy, type Reservation } from './state/records.js';
import { holders } from './state/holder-keys.js';
import { refuseSwarmPool } from './pools/pool-checks.js';
import { bindLogicalPool } from './pools/bind-logical.js';
import { HolderIndex } from './index/holder-index.js';
import { Keyed, type AddressRequest, type KeyedDeps } from './allocation/allocator.js';
import { Release } from './allocation/release.js';
import { SharedPools } from './allocation/shared-pool.js';
import { OneHostPools, type AddressStrategy } from './allocation/one-host-pool.js';
import { inTurn } from './allocation/one-at-a-time.js';
import { Doubts } from './recovery/unconfirmed.js';
import { IndexSync } from './index/index-sync.js';
import { settleDoubt, type SettleDeps } from './recovery/settle-unconfirmed.js';
import { RecentReservations, type BindOps } from './allocation/bind-endpoint.js';
import { Binder } from './allocation/bind-again.js';
import { poolUsage, type PoolUsage } from './index/usage.js';
import { EndpointRelease, type ReleaseOps } from './allocation/endpoint-release.js';

export { ADDRESS_SPACES, IPAM_OPTIONS, poolIdOf, type PoolRequest } from './pools/pools.js';
export type { AddressRequest } from './allocation/allocator.js';
export type { IpamDeps } from './ipam-deps.js';

export class Ipam {
  private readonly index = new PoolIndex();
  private readonly holders = new HolderIndex();
  private readonly keyed: Keyed;
  private readonly release: Release;
  /** The reservations this process writes, as written: the watch's events of them are not decoded again. */
  private readonly recent = new RecentReservations((r, json) => this.sync.own.wrote(r, json));
  private readonly sync: IndexSync;
  private readonly now = (): Date => new Date();

  private readonly pools: Pools;
  private readonly shared: SharedPools;
  /** Each pool's reservations and releases in turn (one-at-a-time.ts). */
  private readonly inTurn: { shared: AddressStrategy; local: AddressStrategy };
  private readonly doubts: Doubts;
  private readonly endpointRelease: EndpointRelease;
  private readonly binder: Binder;

  constructor(private readonly deps: IpamDeps) {
    this.sync = new IndexSync(this.index, deps, this.holders);
    this.pools = new Pools({ ...deps, now: this.now }, this.index);
    this.shared = new SharedPools({
      store: deps.store,
      host: deps.host,
      now: this.now,
      written: this.recent,
    });
    this.inTurn = inTurn(this.shared, new OneHostPools(deps.store, this.recent));
    const keyedDeps: KeyedDeps = {
      store: deps.store,
      host: deps.host,
      now: this.now,
      holders: this.holders,
      usable: (poolId) => this.usable(poolId),
      pool: (poolId) => this.pool(poolId),
      strategy: (pool) => this.strategy(pool),
      written: (poolId, r) => this.recent.note(poolId, r),
      writing: (r) => this.recent.writing(r),
    };
    this.keyed = new Keyed(keyedDeps);
    this.release = new Release({
      ...keyedDeps,
      log: deps.log,
      ...(deps.endpointExists === undefined ? {} : { endpointExists: deps.endpointExists }),
    });
    const settle: SettleDeps = {
      store: deps.store,
      log: deps.log,
      host: deps.host,
      releasePool: (poolId) => this.pools.release(poolId),
      releaseAddress: async (poolId, address, onlyIf) => void (await this.releaseIf(poolId, address, onlyIf)),
    };
    this.doubts = new Doubts((d) => settleDoubt(settle, d), deps.log, deps.journal, deps.doubtConfirmMs);
    this.endpointRelease = new EndpointRelease({
      ...keyedDeps,
      log: deps.log,
      recent: this.recent,
      poolsHolding: (a) => this.poolsHolding(a)?.flatMap((id) => this.index.pools.get(id) ?? []),
    });
    this.binder = new Binder({ ...deps, now: this.now, tombstones: this.endpointRelease.tombstones }, this);
  }

  /** Takes up the journal, loads the index and follows the store in the background; requests wait for it. */
  start(): void {
    this.doubts.load();
    this.sync.start();
    // This host's tombstones, once the index is in (the first release after a failed read tries again).
    this.sync
      .ready()
      .then(
        () => this.endpointRelease.load(),
        () => undefined,
      )
      .catch(() => undefined);
  }

  async stop(): Promise<void> {
    await this.endpointRelease.stop();
    await this.doubts.stop();
    await this.sync.stop();
  }

  defaultAddressSpaces(): { local: string; global: string } {
    return { local: ADDRESS_SPACES.local, global: ADDRESS_SPACES.global };
  }

  async requestPool(req: PoolRequest): Promise<{ poolId: string; pool: string }> {
    refuseSwarmPool(req, this.deps.swarmScope === true);
    const token = randomBytes(8).toString('hex');
    try {
      await this.ready();
      return await this.pools.request(req, token);
    } catch (err) {
      // A pool created but unconfirmed would block this subnet for good: settle it later.
      if (isOvsnetError(err) && err.retryable) this.doubts.add({ kind: 'pool', token, at: this.now() });
      throw err;
    }
  }

  async releasePool(poolId: string): Promise<void> {
    await this.ready();
    await this.pools.release(poolId);
    this.endpointRelease.forgetPool(poolId);
  }

  /** A dead host leaves a logical network's pool (dead-host-reclaim.ts); the last user removes it. */
  async leavePool(poolId: string, host: string): Promise<void> {
    await this.ready();
    await this.pools.release(poolId, host);
  }

  async requestAddress(req: AddressRequest): Promise<{ address: string }> {
    const token = randomBytes(8).toString('hex');
    try {
      await this.ready();
      return await this.keyed.request(req, token);
    } catch (err) {
      // The store may still apply a reservation whose answer was lost: settle it later.
      if (isOvsnetError(err) && err.retryable) this.doubts.add({ kind: 'request', poolId: req.poolId, token, at: this.now() });
      throw err;
    }
  }

  async releaseAddress(poolId: string, address: string): Promise<void> {
    const at = this.now();
    try {
      if (await this.endpointRelease.consume(poolId, address)) return; // DeleteEndpoint freed it
      await this.releaseIf(poolId, address);
    } catch (err) {
      // Docker only logs a failed release: do it again once the store answers.
      if (isOvsnetError(err) && err.retryable) this.doubts.add({ kind: 'release', poolId, address, at });
      throw err;
    }
  }

  /** Unconfirmed changes not settled yet (tests, status). */
  get unsettled(): number {
    return this.doubts.size;
  }

  /** Settles unconfirmed changes now (the background does it on its own). */
  settle(): Promise<void> {
    return this.doubts.settleAll();
  }

  /**
   * Releases the address when its reservation passes `onlyIf` (settling a doubt, reaping);
   * without it, as Docker's release: never a CNI attachment's address. True when released.
   */
  async releaseIf(poolId: string, address: string, onlyIf?: (r: Reservation) => boolean): Promise<boolean> {
    await this.ready();
    return this.release.byAddress(poolId, address, onlyIf);
  }

  /** Releases what the holder key holds (CNI DEL or GC), in `poolId` only when given; the addresses freed. Idempotent. */
  async releaseHolder(holder: string, poolId?: string): Promise<string[]> {
    await this.ready();
    return this.release.byHolder(holder, poolId);
  }

  /** The holders of a pool whose key starts with `prefix`, with their addresses (CNI GC). A read. */
  async holdersIn(poolId: string, prefix: string): Promise<{ holder: string; address: string }[]> {
    await this.ready();
    return this.holders.inPool(poolId, prefix);
  }

  /** `ovsnet ipam adopt`: reserves `address` for `holder` in this host's pool holding it (allocator.ts). */
  async adopt(address: string, holder: string, from: string, name?: string): ReturnType<Keyed['adopt']> {
    await this.ready();
    return this.keyed.adopt(this.poolsHolding(address) ?? [], address, holder, from, name);
  }

  /** Makes the ovsnet pool `cidr` logical network `name`'s, shared in blocks (bind-logical.ts); undefined if no ovsnet pool is `cidr`. */
  async bindLogical(cidr: string, name: string): Promise<string | undefined> {
    await this.ready();
    return bindLogicalPool(() => [...this.index.pools.values()].find((p) => p.record.pool === cidr), this.shared, this.deps, cidr, name);
  }

  /** An address of this host's pool `cidr` for the host itself (an infra port); undefined if none is ovsnet's. */
  async hostAddress(cidr: string, name: string): Promise<string | undefined> {
    await this.ready();
    const pool = this.hostPool(cidr);
    if (pool === undefined) return undefined;
    return (await this.requestAddress({ poolId: pool.record.poolId, address: '', gateway: false, holder: holders.hostPort(name) })).address;
  }

  /** Gives back an address hostAddress() handed out (CIDR form). Idempotent. */
  async releaseHostAddress(cidr: string, address: string): Promise<void> {
    await this.ready();
    const pool = this.hostPool(cidr);
    if (pool !== undefined) await this.releaseAddress(pool.record.poolId, address.split('/')[0] ?? '');
  }

  private hostPool(cidr: string): PoolState | undefined {
    return [...this.index.pools.values()].find((p) => p.record.pool === cidr && poolUsableBy(p.record, this.deps.host));
  }

  /** The logical network whose pool `cidr` is, if any (from the index: no store round trip). */
  logicalOf(cidr: string): string | undefined {
    return [...this.index.pools.values()].find((p) => p.record.pool === cidr && p.record.logical !== undefined)?.record.logical;
  }

  /** The pools whose subnet holds `address` (plain form), from the index; undefined while it is not loaded. */
  poolsHolding(address: string): string[] | undefined {
    if (!this.sync.isReady) return undefined;
    const { family, value } = parseAddress(address);
    return [...this.index.pools.values()].filter((p) => containsAddress(p.prefix, family, value)).map((p) => p.record.poolId);
  }

  /** Marks the reservation of `address` with the endpoint using it; false when ovsnet holds none. Idempotent (bind-again.ts). */
  bindEndpoint(address: string, endpointId: string): Promise<boolean> {
    return this.binder.bind(address, endpointId);
  }

  /** The reaper's release (releaseIf); the address of a request never bound is remembered for its CreateEndpoint. */
  reap(poolId: string, address: string, onlyIf: (r: Reservation) => boolean, neverBound: boolean): Promise<boolean> {
    return this.binder.reap(poolId, address, onlyIf, neverBound);
  }

  /** bindEndpoint as ops of the caller's transaction, when this process wrote the reservation (bind-endpoint.ts). */
  bindOps(address: string, endpointId: string): BindOps | undefined {
    return this.recent.bindOps(address, endpointId);
  }

  /** DeleteEndpoint's release of the endpoint's address, in the driver's transaction (endpoint-release.ts). */
  releaseOps(address: string, endpointId: string): ReleaseOps | undefined {
    return this.endpointRelease.ops(address, endpointId);
  }

  /** Pool usage, for status output and tests. */
  usage(): PoolUsage[] {
    return [...this.index.pools.values()].map(poolUsage);
  }

  /** How a pool's addresses are reserved: per-host blocks when shared, else the pool's count. */
  private strategy(pool: PoolState): AddressStrategy {
    return pool.shared ? this.inTurn.shared : this.inTurn.local;
  }

  /** The pool, if this host may use it (poolUsableBy): another host's one-host pool is not found. */
  private async usable(poolId: string): Promise<PoolState | undefined> {
    const pool = this.index.pools.get(poolId) ?? (await this.sync.loadPool(poolId));
    return pool !== undefined && poolUsableBy(pool.record, this.deps.host) ? pool : undefined;
  }

  private async pool(poolId: string): Promise<PoolState> {
    const pool = await this.usable(poolId);
    if (pool === undefined) {
      throw new OvsnetError(
        'IPAM_POOL_NOT_FOUND',
        `pool ${JSON.stringify(poolId)} does not exist on host ${this.deps.host}: it was released, or was never requested from this host's ovsnet`,
      );
    }
    return pool;
  }

  /** Waits for the index's first load (and starts it, with the journal, when start() was not called). */
  private async ready(): Promise<void> {
    if (this.sync.isReady) return;
    this.start();
    await this.sync.ready();
  }
}
