/**
 * Ipam.bindLogical: makes the ovsnet pool of a subnet the shared pool of a logical network
 * (idempotent). Its reservations so far move from the pool's count into unowned blocks, in one
 * transaction (SharedPools.share); retried while the pool changes under it.
 */
import { OvsnetError } from '../../lib/errors.js';
import type { Logger } from '../../lib/log.js';
import type { PoolState } from '../index/pool-index.js';
import { poolUsableBy } from '../state/records.js';
import type { SharedPools } from '../allocation/shared-pool.js';

const MAX_RETRIES = 64;

/** The PoolID, or undefined when no pool of this host is `cidr` (the network uses another IPAM). */
export async function bindLogicalPool(
  find: () => PoolState | undefined,
  shared: Pick<SharedPools, 'share'>,
  deps: { readonly host: string; readonly log: Logger },
  cidr: string,
  name: string,
): Promise<string | undefined> {
  for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
    const pool = find();
    if (pool === undefined || !poolUsableBy(pool.record, deps.host)) return undefined; // none of this host's
    const { poolId } = pool.record;
    if (pool.record.logical === name) return poolId;
    if (pool.record.logical !== undefined) {
      throw new OvsnetError(
        'LOGICAL_NETWORK_MISMATCH',
        `subnet ${cidr} belongs to logical network ${pool.record.logical}: use -o ovsnet.network=${pool.record.logical}, or another subnet`,
      );
    }
    const result = await shared.share(pool, name);
    if (result === 'gone') return undefined;
    if (result === 'shared') {
      deps.log.info({ poolId, logical: name }, 'pool shared by a logical network');
      return poolId;
    }
  }
  throw new OvsnetError('NOT_READY', `pool ${cidr} is changing too fast to share; retry`);
}
