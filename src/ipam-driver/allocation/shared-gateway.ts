/**
 * The one rule for a gateway several networks use: a logical network's, the same on every
 * host (each host's Docker asks for it), and a parent network's, shared with its endpoint groups
 * (group-pool.ts). Asking for it again is answered with it; a release leaves it while another
 * network still uses the pool (another host of the logical network, a group or its parent).
 */
import type { PoolRecord } from '../state/records.js';

/** Whether the pool's gateway is common to several networks: a request for it finds it held and gets it. */
export function sharesGateway(pool: PoolRecord): boolean {
  return pool.logical !== undefined || (pool.shares ?? 0) > 0;
}

/** Whether a release of the gateway by `host` leaves it: another network still uses the pool. */
export function keepsGateway(pool: PoolRecord, host: string): boolean {
  return (pool.shares ?? 0) > 0 || (pool.hostShares?.[host] ?? 0) > 0 || (pool.users ?? []).some((u) => u !== host);
}
