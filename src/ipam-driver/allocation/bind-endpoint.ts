/**
 * Binding an IPAM reservation to the endpoint that uses it. The network driver asks for this in
 * CreateEndpoint (IPAM runs first: allocate-then-CreateEndpoint) through its pools dependency
 * (Ipam.bindEndpoint), so that later work can adopt and reap by endpoint; only ovsnet's IPAM
 * writes reservation keys.
 */
import { containsAddress, parseAddress, parseCidr } from '../../lib/cidr.js';
import type { Compare, Op, Store } from '../../store/types.js';
import { describeHolder, type Reservation } from '../state/records.js';
import { OvsnetError } from '../../lib/errors.js';
import type { EndpointExists } from './release-guard.js';
import { listPools, readReservation } from '../state/ipam-reads.js';
import { reservationTxn } from '../state/ipam-txn.js';

/** What binding found: bound, or the pools holding the address that hold no reservation of it (none: Docker's IPAM gave it). */
export type Binding = { readonly bound: true } | { readonly bound: false; readonly unreserved: readonly string[] };

/**
 * Marks the reservation of `address` (plain or CIDR form) with `endpointId`. Idempotent.
 * `poolIds`: the pools whose subnet holds the address, when the caller knows them (the IPAM
 * index); else every pool record is read to find them. `live`: whether an endpoint's record
 * exists; a reservation bound to another endpoint that `live` says exists is never taken from it
 * (IPAM_ADDRESS_TAKEN): two containers never share an address, even one Docker was handed twice
 * (freed between a RequestAddress and its CreateEndpoint, then handed out again).
 */
export async function bindReservation(
  store: Store,
  address: string,
  endpointId: string,
  poolIds?: readonly string[],
  live?: EndpointExists,
): Promise<Binding> {
  const plain = address.split('/')[0] ?? '';
  const unreserved: string[] = [];
  for (const poolId of poolIds ?? (await poolsHolding(store, plain))) {
    for (let attempt = 0; attempt < 8; attempt++) {
      const held = await readReservation(store, poolId, plain);
      if (held === undefined) {
        unreserved.push(poolId);
        break;
      }
      const other = held.record.endpoint;
      if (other === endpointId) return { bound: true };
      if (other !== undefined && live !== undefined && (await live(other, plain))) {
        throw new OvsnetError(
          'IPAM_ADDRESS_TAKEN',
          `endpoint ${endpointId.slice(0, 12)}: address ${plain} is bound to endpoint ${other.slice(0, 12)}, whose record exists (${describeHolder(held.record)}): Docker was handed it twice (it was freed between a RequestAddress and its CreateEndpoint, then handed out again); start the container again: Docker then asks for a new address`,
        );
      }
      const res = await store.txn({
        compares: [reservationTxn.unchanged(poolId, plain, held.modRevision)],
        success: [reservationTxn.put({ ...held.record, endpoint: endpointId })],
      });
      if (res.succeeded) return { bound: true };
    }
  }
  return { bound: false, unreserved };
}

async function poolsHolding(store: Store, address: string): Promise<string[]> {
  const { family, value } = parseAddress(address);
  const pools = (await listPools(store)).map((p) => p.record);
  return pools.filter((p) => containsAddress(parseCidr(p.pool), family, value)).map((p) => p.poolId);
}

/** The store operations that bind a reservation, for a caller to run in its own transaction. */
export interface BindOps {
  readonly compares: readonly Compare[];
  readonly success: readonly Op[];
}

/** How many reservations this process wrote are remembered for bindOps (the oldest go first). */
const RECENT_LIMIT = 4096;

/**
 * The reservations this process wrote last, as written: what CreateEndpoint's binding needs to
 * go into the endpoint record's own transaction (one store round trip, not three: no read of the
 * reservation, no transaction of its own), and what a release compares instead of reading it
 * (judged-release.ts). A record is noted once its write succeeded (allocator.ts), never on a
 * try: a try at an address held already would overwrite the note of what is stored there. The
 * binding compares the stored value with the note, so a record changed since (released,
 * reserved again, bound) fails the compare and the caller binds the usual way (bindReservation).
 */
export class RecentReservations {
  /** Reservation (pool and address) -> the JSON last written there by this process. */
  private readonly byKey = new Map<string, string>();
  /** Plain address -> its reservation, until bound. */
  private readonly unbound = new Map<string, { poolId: string; address: string }>();

  /** `onWrite`: each record about to be written or bound here, with its JSON (the IPAM index's own records: own-reservations.ts). */
  constructor(private readonly onWrite: (r: Reservation, json: string) => void = () => undefined) {}

  /** A record about to be written (its write may fail): told to onWrite only, nothing remembered. */
  writing(reservation: Reservation): void {
    this.onWrite(reservation, JSON.stringify(reservation));
  }

  /** A record whose write succeeded. */
  note(poolId: string, reservation: Reservation): void {
    const json = JSON.stringify(reservation);
    this.remember(this.unbound, reservation.address, { poolId, address: reservation.address });
    this.remember(this.byKey, idOf(poolId, reservation.address), json);
  }

  /** The binding of `address` (plain or CIDR form) to `endpointId` as transaction ops; undefined when not remembered. */
  bindOps(address: string, endpointId: string): BindOps | undefined {
    const plain = address.split('/')[0] ?? '';
    const at = this.unbound.get(plain);
    const json = at === undefined ? undefined : this.byKey.get(idOf(at.poolId, at.address));
    this.unbound.delete(plain); // bound once: a second CreateEndpoint binds the usual way
    if (at === undefined || json === undefined) return undefined;
    const bound: Reservation = { ...(JSON.parse(json) as Reservation), endpoint: endpointId };
    const boundJson = JSON.stringify(bound);
    // What the release compares (if the bind did not happen, it reads).
    this.remember(this.byKey, idOf(at.poolId, at.address), boundJson);
    this.onWrite(bound, boundJson);
    return { compares: [reservationTxn.valueIs(at.poolId, at.address, json)], success: [reservationTxn.put(bound)] };
  }

  /** The JSON this process last wrote for the reservation, kept. */
  peek(poolId: string, address: string): string | undefined {
    return this.byKey.get(idOf(poolId, address));
  }

  /** The JSON this process last wrote for the reservation (forgotten once taken: the release is its last use). */
  take(poolId: string, address: string): string | undefined {
    const id = idOf(poolId, address);
    const json = this.byKey.get(id);
    this.byKey.delete(id);
    return json;
  }

  private remember<V>(map: Map<string, V>, k: string, v: V): void {
    map.delete(k);
    map.set(k, v);
    if (map.size > RECENT_LIMIT) map.delete(map.keys().next().value ?? '');
  }
}

const idOf = (poolId: string, address: string) => `${poolId}\0${address}`;
