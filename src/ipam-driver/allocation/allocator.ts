/**
 * Allocation by holder key (holder-keys.ts): what Ipam does with a RequestAddress or a CNI ADD;
 * their releases are release.ts's.
 * - A keyed holder that holds an address of the pool gets that address again (a repeated CNI ADD,
 *   a retried Docker request with its endpoint name): the count does not move. Requests of one
 *   key run one at a time in this process; only the key's own host allocates for it.
 * - In a sticky pool (`--ipam-opt ovsnet.sticky=true`) a key gets back the address it held last
 *   while that address is free (the release leaves a sticky record behind).
 * - A gateway several networks share is answered with, not refused (shared-gateway.ts).
 * - An address `ovsnet ipam adopt docker` kept for a running container is taken over by the
 *   request for exactly that address (the container moving over with `--ip`), not handed out.
 */
import { OvsnetError } from '../../lib/errors.js';
import { defaultGateway, formatAddress, formatWithLength } from '../../lib/cidr.js';
import { KeyedLock } from '../../lib/locks.js';
import type { Store } from '../../store/types.js';
import { addressIn, checkRequested } from './address-checks.js';
import type { HolderIndex } from '../index/holder-index.js';
import { holderOf, holders, isKeyed, STICKY } from '../state/holder-keys.js';
import type { AddressStrategy } from './one-host-pool.js';
import type { PoolState } from '../index/pool-index.js';
import { describeHolder, type Reservation, type ReservationKind } from '../state/records.js';
import { readReservation } from '../state/ipam-reads.js';
import { reservationTxn } from '../state/ipam-txn.js';
import { sharesGateway } from './shared-gateway.js';

export interface AddressRequest {
  readonly poolId: string;
  /** '' for any free address of the range. */
  readonly address: string;
  readonly gateway: boolean;
  /** Docker's endpoint name (dockerd 29+), for the reservation record and its holder key. */
  readonly name?: string;
  /** The holder key (holder-keys.ts); absent for Docker's requests, whose key is made here. */
  readonly holder?: string;
}

export interface KeyedDeps {
  readonly store: Store;
  readonly host: string;
  readonly now: () => Date;
  readonly holders: HolderIndex;
  /** The pool, if this host may use it. */
  readonly usable: (poolId: string) => Promise<PoolState | undefined>;
  /** The pool, or IPAM_POOL_NOT_FOUND. */
  readonly pool: (poolId: string) => Promise<PoolState>;
  readonly strategy: (pool: PoolState) => AddressStrategy;
  /** Told each container's reservation record once its write succeeded (bind-endpoint.ts RecentReservations). */
  readonly written?: (poolId: string, r: Reservation) => void;
  /** Told each container's reservation record before its write is tried: its watch event may come back first (own-reservations.ts). */
  readonly writing?: (r: Reservation) => void;
}

export const isSticky = (pool: PoolState) => pool.record.options[STICKY] === 'true';

export class Keyed {
  private readonly locks = new KeyedLock();

  constructor(private readonly deps: KeyedDeps) {}

  /** The holder key of a request: its own, or Docker's (by name, else unique to the request). */
  holderOf(req: AddressRequest, token: string): string {
    if (req.holder !== undefined) return req.holder;
    if (req.gateway) return holders.dockerGateway;
    return req.name === undefined ? holders.dockerRequest(this.deps.host, token) : holders.dockerName(this.deps.host, req.name);
  }

  async request(req: AddressRequest, token: string): Promise<{ address: string }> {
    const pool = await this.deps.pool(req.poolId);
    const holder = this.holderOf(req, token);
    if (!isKeyed(holder)) return this.reserve(pool, req, holder, token);
    return this.locks.run(`${req.poolId}\0${holder}`, async () => {
      const held = await this.heldBy(pool, holder);
      if (held === undefined) return this.reserve(pool, req, holder, token);
      if (req.address !== '' && addressIn(pool, req.address) !== held) {
        throw new OvsnetError(
          'IPAM_ADDRESS_TAKEN',
          `${holder} already holds ${formatAddress(pool.prefix.family, held)} in pool ${pool.record.pool}, not ${req.address}: release it first (CNI DEL, or remove the container), or ask for the address it holds`,
        );
      }
      return { address: formatWithLength(pool.prefix.family, held, pool.prefix.bits) };
    });
  }

  /**
   * Takes over an address another allocator handed out (`ovsnet ipam adopt`): a static
   * reservation for `holder` in the pool of this host holding `address`. 'held' when that holder
   * has it already (adopting twice changes nothing); the reservation in the way otherwise.
   */
  async adopt(
    poolIds: readonly string[],
    address: string,
    holder: string,
    from: string,
    name?: string,
  ): Promise<{ outcome: 'adopted' | 'held'; pool: string } | { outcome: 'taken'; pool: string; by: Reservation } | { outcome: 'no pool' }> {
    for (const poolId of poolIds) {
      const pool = await this.deps.usable(poolId);
      if (pool === undefined) continue;
      const value = addressIn(pool, address);
      const record = (a: string): Reservation => ({
        address: a,
        poolId,
        kind: 'static',
        host: this.deps.host,
        ...(name === undefined ? {} : { name }),
        reservedAt: this.deps.now().toISOString(),
        holder,
        adoptedFrom: from,
      });
      const taken = await this.deps.strategy(pool).reserve(pool, value, record);
      if (taken === undefined) {
        this.deps.holders.note(record(formatAddress(pool.prefix.family, value)));
        return { outcome: 'adopted', pool: pool.record.pool };
      }
      return holderOf(taken) === holder
        ? { outcome: 'held', pool: pool.record.pool }
        : { outcome: 'taken', pool: pool.record.pool, by: taken };
    }
    return { outcome: 'no pool' };
  }

  /** The address `holder` holds in the pool, checked against the store (the map is a hint). */
  private async heldBy(pool: PoolState, holder: string): Promise<bigint | undefined> {
    const { poolId } = pool.record;
    const address = this.deps.holders.addressOf(poolId, holder);
    if (address === undefined) return undefined;
    const held = await readReservation(this.deps.store, poolId, address);
    if (held !== undefined && holderOf(held.record) === holder) return addressIn(pool, address);
    if (held === undefined) this.deps.holders.forget(poolId, address);
    return undefined;
  }

  /** A new reservation for `holder`: the address asked for, its sticky one, or any free one. */
  private async reserve(pool: PoolState, req: AddressRequest, holder: string, token: string): Promise<{ address: string }> {
    const { family, bits } = pool.prefix;
    // The record written for each address tried, so that the index notes the one stored.
    const tried = new Map<string, Reservation>();
    const record =
      (kind: ReservationKind) =>
      (address: string): Reservation => {
        const r: Reservation = {
          address,
          poolId: pool.record.poolId,
          kind,
          host: this.deps.host,
          ...(req.name === undefined ? {} : { name: req.name }),
          reservedAt: this.deps.now().toISOString(),
          token,
          holder,
        };
        tried.set(address, r);
        // Before the write: its watch event may come back before its answer (own-reservations.ts);
        // a try that fails leaves a note no event matches, used by none.
        if (kind !== 'gateway') this.deps.writing?.(r);
        return r;
      };
    const strategy = this.deps.strategy(pool);
    // Noted once stored, never on a try: a try at an address held already would overwrite the
    // note of what is stored there, and that reservation's bind and release would then fall back.
    const made = (value: bigint, kind: ReservationKind) => {
      const address = formatAddress(family, value);
      const r = tried.get(address) ?? record(kind)(address);
      this.deps.holders.note(r);
      if (kind !== 'gateway') this.deps.written?.(pool.record.poolId, r);
      return { address: formatWithLength(family, value, bits) };
    };
    if (req.gateway || req.address !== '') {
      const value = req.address === '' ? defaultGateway(pool.prefix) : checkRequested(pool, req.address, req.gateway);
      const kind: ReservationKind = req.gateway ? 'gateway' : 'static';
      let taken = await strategy.reserve(pool, value, record(kind));
      if (taken?.kind === 'gateway' && req.gateway && sharesGateway(pool.record)) return { address: formatWithLength(family, value, bits) };
      if (taken !== undefined && !req.gateway) taken = await this.takeOver(pool, value, taken, req, record(kind));
      if (taken !== undefined) {
        throw new OvsnetError(
          'IPAM_ADDRESS_TAKEN',
          `address ${formatAddress(family, value)} is already in use in pool ${pool.record.pool}: reserved by ${describeHolder(taken)}; choose another address or let ovsnet pick one`,
        );
      }
      return made(value, kind);
    }
    const last = isSticky(pool) ? this.deps.holders.stickyOf(pool.record.poolId, holder) : undefined;
    if (last !== undefined) {
      const value = addressIn(pool, last.address);
      const inRange = pool.bounds !== undefined && value >= pool.bounds.first && value <= pool.bounds.last;
      if (inRange && !pool.isMarked(value) && (await strategy.reserve(pool, value, record('dynamic'))) === undefined)
        return made(value, 'dynamic');
    }
    const value = await strategy.allocate(pool, record('dynamic'));
    if (value !== undefined) return made(value, 'dynamic');
    const range = pool.record.subPool === undefined ? '' : ` (range ${pool.record.subPool})`;
    throw new OvsnetError(
      'IPAM_POOL_EXHAUSTED',
      `no free address in pool ${pool.record.pool}${range}: all ${pool.capacity} usable addresses are in use; remove containers or use a larger --subnet / --ip-range`,
    );
  }

  /**
   * An address adopted for a running Docker container goes to the request for exactly that
   * address (with dockerd 29+, only one carrying the container's name): the record is replaced
   * in one transaction, the count stays. Returns the holder still in the way, if any.
   */
  private async takeOver(
    pool: PoolState,
    value: bigint,
    taken: Reservation,
    req: AddressRequest,
    record: (address: string) => Reservation,
  ): Promise<Reservation | undefined> {
    const adopted = taken.holder?.startsWith('adopted/docker/') === true && taken.endpoint === undefined;
    if (!adopted || (req.name !== undefined && taken.name !== undefined && req.name !== taken.name)) return taken;
    const { poolId } = pool.record;
    const held = await readReservation(this.deps.store, poolId, taken.address);
    if (held === undefined || holderOf(held.record) !== holderOf(taken)) return taken;
    const res = await this.deps.store.txn({
      compares: [reservationTxn.unchanged(poolId, taken.address, held.modRevision)],
      success: [reservationTxn.put(record(formatAddress(pool.prefix.family, value)))],
      failure: [reservationTxn.get(poolId, taken.address)],
    });
    return res.succeeded ? undefined : taken;
  }
}
