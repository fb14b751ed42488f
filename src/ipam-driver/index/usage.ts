/**
 * Pool usage, from the pool index: the daemon (Ipam.usage(): status output and metrics) and the
 * CLI (`ovsnet pools`, from its own snapshot of the store loaded into a PoolIndex) compute their
 * figures with this one function.
 */
import { formatAddress } from '../../lib/cidr.js';
import type { PoolState } from './pool-index.js';

export interface PoolUsage {
  readonly poolId: string;
  readonly pool: string;
  /** Reserved addresses as counted: the pool's count, or for a shared pool its blocks' counts. */
  readonly count: number;
  /** Reservation records of the pool (each one address). */
  readonly reserved: number;
  /** Usable addresses of the range addresses are handed out from. */
  readonly capacity: bigint;
  /** Shared pools: the logical network, and each block with its owner ('' for none). */
  readonly logical?: string;
  readonly blocks?: { start: string; host: string; count: number }[];
}

export function poolUsage(p: PoolState): PoolUsage {
  return {
    poolId: p.record.poolId,
    pool: p.record.pool,
    count: p.used,
    ...(p.shared
      ? {
          logical: p.record.logical ?? '',
          blocks: [...p.blocks].flatMap(([start, b]) =>
            b.record === undefined ? [] : [{ start: formatAddress(p.prefix.family, start), host: b.record.host, count: b.record.count }],
          ),
        }
      : {}),
    reserved: p.reserved.count,
    capacity: p.capacity,
  };
}
