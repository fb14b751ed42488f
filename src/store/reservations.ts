/**
 * Binding an IPAM reservation to the endpoint that uses it. The network driver calls this in
 * CreateEndpoint (IPAM runs first: allocate-then-CreateEndpoint), so that later work can adopt
 * and reap by endpoint. It knows only the key layout and the two fields it needs, so driver and
 * IPAM stay independent of each other.
 */
import { containsAddress, parseAddress, parseCidr } from '../cidr.js';
import { keys } from './keys.js';
import { modRevisionIs, put, type Store } from './types.js';

/**
 * Marks the reservation of `address` (plain or CIDR form) with `endpointId`. Returns false when
 * no ovsnet reservation holds the address (Docker's default IPAM gave it). Idempotent.
 */
export async function bindReservation(store: Store, address: string, endpointId: string): Promise<boolean> {
  const { family, value } = parseAddress(address.split('/')[0] ?? '');
  const pools = (await store.list(keys.pools)).kvs.map((kv) => JSON.parse(kv.value) as { poolId: string; pool: string });
  for (const p of pools) {
    if (!containsAddress(parseCidr(p.pool), family, value)) continue;
    const key = keys.address(p.poolId, address.split('/')[0] ?? '');
    for (let attempt = 0; attempt < 8; attempt++) {
      const kv = await store.get(key);
      if (kv === undefined) break;
      const record = JSON.parse(kv.value) as { endpoint?: string };
      if (record.endpoint === endpointId) return true;
      const res = await store.txn({ compares: [modRevisionIs(key, kv.modRevision)], success: [put(key, JSON.stringify({ ...record, endpoint: endpointId }))] });
      if (res.succeeded) return true;
    }
  }
  return false;
}
