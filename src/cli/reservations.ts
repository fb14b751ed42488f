/**
 * `ovsnet ipam --reservations [POOL]`: every reservation with its holder
 * (src/ipam-driver/state/holder-keys.ts), the host that made it and its age; POOL (a subnet or
 * a PoolID) narrows it to one pool. A pure read of the store.
 */
import { OvsnetError } from '../lib/errors.js';
import { holderOf } from '../ipam-driver/state/holder-keys.js';
import { listPools, listReservations } from '../ipam-driver/state/ipam-reads.js';
import type { Store } from '../store/types.js';
import { parseAddress } from '../lib/cidr.js';

export interface ReservationRow {
  pool: string;
  address: string;
  kind: string;
  holder: string;
  host: string;
  age: string;
  /** Docker's endpoint name, or '' . */
  name: string;
  /** Which allocator it was adopted from, or ''. */
  adopted: string;
  reservedAt: string;
}

/** 42s, 5m, 3h, 2d: the largest whole unit. */
export function age(ms: number): string {
  const s = Math.max(Math.floor(ms / 1000), 0);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

export async function reservations(store: Store, pool: string | undefined, now = new Date()): Promise<ReservationRow[]> {
  const pools = (await listPools(store)).map((p) => p.record);
  const chosen = pool === undefined ? pools : pools.filter((p) => p.pool === pool || p.poolId === pool || p.subPool === pool);
  if (pool !== undefined && chosen.length === 0) {
    const known = pools.map((p) => p.pool).join(', ');
    throw new OvsnetError(
      'IPAM_POOL_NOT_FOUND',
      `no ovsnet pool is ${pool}: give a subnet or PoolID of one of ${known === '' ? '(none)' : known}`,
    );
  }
  const rows: ReservationRow[] = [];
  for (const p of chosen) {
    for (const r of await listReservations(store, p.poolId)) {
      rows.push({
        pool: p.pool,
        address: r.address,
        kind: r.kind,
        holder: holderOf(r),
        host: r.host,
        age: age(now.getTime() - Date.parse(r.reservedAt)),
        name: r.name ?? '',
        adopted: r.adoptedFrom ?? '',
        reservedAt: r.reservedAt,
      });
    }
  }
  const order = (a: string) => parseAddress(a).value;
  return rows.sort((a, b) => (a.pool === b.pool ? (order(a.address) < order(b.address) ? -1 : 1) : a.pool < b.pool ? -1 : 1));
}
