/**
 * Address management: pools and one reservation record per address in the store.
 *
 * - A reservation is one transaction: create-if-absent on the address key and a count moved
 *   by compare-and-swap, so count == reservations, always (contiv's EpAddrCount rule), across
 *   processes and hosts sharing one store. One-host pools keep one count (one-host.ts); pools
 *   shared by a logical network keep one per block, each block owned by a host (shared.ts).
 * - Pools (creation, release, overlap checks, dynamic pools, sharing) are in pools.ts.
 * - The in-memory PoolIndex finds free addresses; index-sync.ts keeps it current with other
 *   processes' writes (a snapshot, then a watch). Addresses a request names are checked in
 *   address.ts.
 * - A change the store did not confirm (a timeout) is settled once it answers (doubts.ts keeps
 *   them, settle.ts undoes them).
 */
import { randomBytes } from 'node:crypto';
import { OvsnetError, isOvsnetError } from '../errors.js';
import { containsAddress, defaultGateway, formatAddress, formatWithLength, parseAddress } from '../cidr.js';
import { addressIn, checkRequested } from './address.js';
import { PoolIndex, type PoolState } from './pool-index.js';
import { ADDRESS_SPACES, Pools, type PoolRequest, type PoolsDeps } from './pools.js';
import { describeHolder, poolUsableBy, type Reservation, type ReservationKind } from './records.js';
import { SharedPools } from './shared.js';
import { OneHostPools, type AddressStrategy } from './one-host.js';
import { Doubts } from './doubts.js';
import { IndexSync } from './index-sync.js';
import { settleDoubt, type SettleDeps } from './settle.js';
import { bindReservation } from './bind.js';
import { poolUsage, type PoolUsage } from './usage.js';

export { ADDRESS_SPACES, IPAM_OPTIONS, poolIdOf, type PoolRequest } from './pools.js';

export interface IpamDeps extends Omit<PoolsDeps, 'now'> {
  /** How long a request waits for the first load of the index. */
  readonly readyTimeoutMs: number;
  /** OVSNET_JOURNAL: where unconfirmed changes outlive a restart ('' or absent: memory only). */
  readonly journal?: string;
  /** doubts.ts: how long a second look waits after a first that found nothing (default 5 s). */
  readonly doubtConfirmMs?: number;
}

export interface AddressRequest {
  readonly poolId: string;
  readonly address: string;
  readonly gateway: boolean;
  /** Docker's endpoint name (v29+), for the reservation record. */
  readonly name?: string;
}

const MAX_RETRIES = 64;

export class Ipam {
  private readonly index = new PoolIndex();
  private readonly sync: IndexSync;
  private readonly now = (): Date => new Date();

  private readonly pools: Pools;
  private readonly shared: SharedPools;
  private readonly local: OneHostPools;
  private readonly doubts: Doubts;

  constructor(private readonly deps: IpamDeps) {
    this.sync = new IndexSync(this.index, deps);
    this.pools = new Pools({ ...deps, now: this.now }, this.index);
    this.shared = new SharedPools({ store: deps.store, host: deps.host, now: this.now });
    this.local = new OneHostPools(deps.store);
    const settle: SettleDeps = {
      store: deps.store,
      log: deps.log,
      host: deps.host,
      releasePool: (poolId) => this.pools.release(poolId),
      releaseAddress: (poolId, address, onlyIf) => this.releaseAddressOnce(poolId, address, onlyIf),
    };
    this.doubts = new Doubts((d) => settleDoubt(settle, d), deps.log, deps.journal, deps.doubtConfirmMs);
  }

  /** Takes up the journal, loads the index and follows the store in the background; requests wait for it. */
  start(): void {
    this.doubts.load();
    this.sync.start();
  }

  async stop(): Promise<void> {
    await this.doubts.stop();
    await this.sync.stop();
  }

  defaultAddressSpaces(): { local: string; global: string } {
    return { local: ADDRESS_SPACES.local, global: ADDRESS_SPACES.global };
  }

  async requestPool(req: PoolRequest): Promise<{ poolId: string; pool: string }> {
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
  }

  /** A dead host leaves a logical network's pool (reclaim.ts); the last user removes it. */
  async leavePool(poolId: string, host: string): Promise<void> {
    await this.ready();
    await this.pools.release(poolId, host);
  }

  async requestAddress(req: AddressRequest): Promise<{ address: string }> {
    const token = randomBytes(8).toString('hex');
    try {
      return await this.requestAddressOnce(req, token);
    } catch (err) {
      // The store may still apply a reservation whose answer was lost: settle it later.
      if (isOvsnetError(err) && err.retryable) this.doubts.add({ kind: 'request', poolId: req.poolId, token, at: this.now() });
      throw err;
    }
  }

  async releaseAddress(poolId: string, address: string): Promise<void> {
    const at = this.now();
    try {
      await this.releaseAddressOnce(poolId, address, undefined);
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

  private async requestAddressOnce(req: AddressRequest, token: string): Promise<{ address: string }> {
    await this.ready();
    const pool = await this.pool(req.poolId);
    const bits = pool.prefix.bits;
    if (req.gateway || req.address !== '') {
      const value = req.address === '' ? defaultGateway(pool.prefix) : checkRequested(pool, req.address, req.gateway);
      const kind: ReservationKind = req.gateway ? 'gateway' : 'static';
      const taken = await this.strategy(pool).reserve(pool, value, this.reservation(pool, kind, req.name, token));
      if (taken !== undefined) {
        throw new OvsnetError(
          'IPAM_ADDRESS_TAKEN',
          `address ${formatAddress(pool.prefix.family, value)} is already in use in pool ${pool.record.pool}: reserved by ${describeHolder(taken)}; choose another address or let ovsnet pick one`,
        );
      }
      return { address: formatWithLength(pool.prefix.family, value, bits) };
    }
    const value = await this.strategy(pool).allocate(pool, this.reservation(pool, 'dynamic', req.name, token));
    if (value !== undefined) return { address: formatWithLength(pool.prefix.family, value, bits) };
    const range = pool.record.subPool === undefined ? '' : ` (range ${pool.record.subPool})`;
    throw new OvsnetError(
      'IPAM_POOL_EXHAUSTED',
      `no free address in pool ${pool.record.pool}${range}: all ${pool.capacity} usable addresses are in use; remove containers or use a larger --subnet / --ip-range`,
    );
  }

  /** Releases the address; with `onlyIf`, only a reservation that passes it (settling a doubt). */
  private async releaseAddressOnce(poolId: string, address: string, onlyIf: ((r: Reservation) => boolean) | undefined): Promise<void> {
    await this.ready();
    const pool = await this.usable(poolId);
    if (pool === undefined) return; // the pool is gone (its reservations with it), or another host's
    await this.strategy(pool).release(pool, addressIn(pool, address), onlyIf);
  }

  /**
   * Makes the ovsnet pool `cidr` the shared pool of logical network `name` (idempotent): from
   * now on its addresses come from per-host blocks. Its reservations so far (the gateway, aux
   * addresses) move from the pool's count into unowned blocks, in one transaction. Returns the
   * PoolID, or undefined when no ovsnet pool is `cidr` (the network uses another IPAM).
   */
  async bindLogical(cidr: string, name: string): Promise<string | undefined> {
    await this.ready();
    for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
      const pool = [...this.index.pools.values()].find((p) => p.record.pool === cidr);
      if (pool === undefined || !poolUsableBy(pool.record, this.deps.host)) return undefined; // none of this host's
      const { poolId } = pool.record;
      if (pool.record.logical === name) return poolId;
      if (pool.record.logical !== undefined) {
        throw new OvsnetError(
          'LOGICAL_NETWORK_MISMATCH',
          `subnet ${cidr} belongs to logical network ${pool.record.logical}: use -o ovsnet.network=${pool.record.logical}, or another subnet`,
        );
      }
      const shared = await this.shared.share(pool, name);
      if (shared === 'gone') return undefined;
      if (shared === 'shared') {
        this.deps.log.info({ poolId, logical: name }, 'pool shared by a logical network');
        return poolId;
      }
    }
    throw new OvsnetError('NOT_READY', `pool ${cidr} is changing too fast to share; retry`);
  }

  /** The logical network whose pool `cidr` is, if any (from the index: no store round trip). */
  logicalOf(cidr: string): string | undefined {
    return [...this.index.pools.values()].find((p) => p.record.pool === cidr && p.record.logical !== undefined)?.record.logical;
  }

  /**
   * The pools whose subnet holds `address` (plain form), from the index: no store round trip.
   * Undefined while the index is not loaded (the caller then asks the store).
   */
  poolsHolding(address: string): string[] | undefined {
    if (!this.sync.isReady) return undefined;
    const { family, value } = parseAddress(address);
    return [...this.index.pools.values()].filter((p) => containsAddress(p.prefix, family, value)).map((p) => p.record.poolId);
  }

  /**
   * Marks the reservation of `address` (plain or CIDR form) with the endpoint using it; false
   * when no ovsnet reservation holds it (Docker's default IPAM gave it). Idempotent.
   */
  bindEndpoint(address: string, endpointId: string): Promise<boolean> {
    return bindReservation(this.deps.store, address, endpointId, this.poolsHolding(address.split('/')[0] ?? ''));
  }

  /** Pool usage, for status output and tests. */
  usage(): PoolUsage[] {
    return [...this.index.pools.values()].map(poolUsage);
  }

  // --- internals -------------------------------------------------------------------------

  /** The reservation record of an address of `pool`. */
  private reservation(pool: PoolState, kind: ReservationKind, name: string | undefined, token: string): (address: string) => Reservation {
    return (address) => ({
      address,
      poolId: pool.record.poolId,
      kind,
      host: this.deps.host,
      ...(name === undefined ? {} : { name }),
      reservedAt: this.now().toISOString(),
      token,
    });
  }

  /** How a pool's addresses are reserved: per-host blocks when shared, else the pool's count. */
  private strategy(pool: PoolState): AddressStrategy {
    return pool.shared ? this.shared : this.local;
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
