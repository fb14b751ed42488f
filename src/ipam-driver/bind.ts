/**
 * Binding an IPAM reservation to the endpoint that uses it. The network driver asks for this in
 * CreateEndpoint (IPAM runs first: allocate-then-CreateEndpoint) through its pools dependency
 * (Ipam.bindEndpoint), so that later work can adopt and reap by endpoint; only ovsnet's IPAM
 * writes reservation keys.
 */
import { decodeAll } from '../store/decode.js';
import { containsAddress, parseAddress, parseCidr } from '../cidr.js';
import { keys } from '../store/keys.js';
import { modRevisionIs, put, type Store } from '../store/types.js';
import { decodePool, decodeReservation } from './records.js';

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
