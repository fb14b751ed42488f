/**
 * Binding an IPAM reservation to the endpoint that uses it. The network driver asks for this in
 * CreateEndpoint (IPAM runs first: allocate-then-CreateEndpoint) through its pools dependency
 * (Ipam.bindEndpoint), so that later work can adopt and reap by endpoint; only ovsnet's IPAM
 * writes reservation keys.
 */
import { decodeAll } from '../../store/decode.js';
import { containsAddress, parseAddress, parseCidr } from '../../lib/cidr.js';
import { keys } from '../../store/keys.js';
import { modRevisionIs, put, type Compare, type Op, type Store } from '../../store/types.js';
import { decodePool, decodeReservation, type Reservation } from '../state/records.js';

/**
 * Marks the reservation of `address` (plain or CIDR form) with `endpointId`. Returns false when
 * no ovsnet reservation holds the address (Docker's default IPAM gave it). Idempotent.
 * `poolIds`: the pools whose subnet holds the address, when the caller knows them (the IPAM
 * index); else every pool record is read to find them.
 */
export async function bindReservation(store: Store, address: string, endpointId: string, poolIds?: readonly string[]): Promise<boolean> {
  const plain = address.split('/')[0] ?? '';
  for (const poolId of poolIds ?? (await poolsHolding(store, plain))) {
    const key = keys.address(poolId, plain);
    for (let attempt = 0; attempt < 8; attempt++) {
      const kv = await store.get(key);
      if (kv === undefined) break;
      const record = decodeReservation(kv);
      if (record.endpoint === endpointId) return true;
      const res = await store.txn({
        compares: [modRevisionIs(key, kv.modRevision)],
        success: [put(key, JSON.stringify({ ...record, endpoint: endpointId }))],
      });
      if (res.succeeded) return true;
    }
  }
  return false;
}

async function poolsHolding(store: Store, address: string): Promise<string[]> {
  const { family, value } = parseAddress(address);
  const pools = decodeAll((await store.list(keys.pools)).kvs, decodePool);
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
 * reservation, no transaction of its own). A record is noted when it is made, before its write
 * is confirmed: the binding compares the stored value with it, so a record that was never
 * written, or changed since (released, reserved again, bound), fails the compare and the caller
 * binds the usual way (bindReservation).
 */
export class RecentReservations {
  /** Reservation key -> the JSON last written there by this process (or about to be). */
  private readonly byKey = new Map<string, string>();
  /** Plain address -> its reservation key, until bound. */
  private readonly unbound = new Map<string, string>();

  note(poolId: string, reservation: Reservation): void {
    const key = keys.address(poolId, reservation.address);
    this.remember(this.unbound, reservation.address, key);
    this.remember(this.byKey, key, JSON.stringify(reservation));
  }

  /** The binding of `address` (plain or CIDR form) to `endpointId` as transaction ops; undefined when not remembered. */
  bindOps(address: string, endpointId: string): BindOps | undefined {
    const plain = address.split('/')[0] ?? '';
    const key = this.unbound.get(plain);
    const json = key === undefined ? undefined : this.byKey.get(key);
    this.unbound.delete(plain); // bound once: a second CreateEndpoint binds the usual way
    if (key === undefined || json === undefined) return undefined;
    const bound = JSON.stringify({ ...(JSON.parse(json) as Reservation), endpoint: endpointId });
    this.remember(this.byKey, key, bound); // what the release compares (if the bind did not happen, it reads)
    return { compares: [{ key, target: 'value', op: '==', value: json }], success: [put(key, bound)] };
  }

  /** The JSON this process last wrote at `key` (forgotten once taken: the release is its last use). */
  take(key: string): string | undefined {
    const json = this.byKey.get(key);
    this.byKey.delete(key);
    return json;
  }

  private remember(map: Map<string, string>, k: string, v: string): void {
    map.delete(k);
    map.set(k, v);
    if (map.size > RECENT_LIMIT) map.delete(map.keys().next().value ?? '');
  }
}
