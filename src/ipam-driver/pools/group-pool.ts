/**
 * Endpoint groups' pools: a group network shares its parent's pool. Docker
 * asks the IPAM for a network's pool before it tells the driver anything, and gives it only
 * --ipam-opt, so a group's RequestPool carries `--ipam-opt ovsnet.group=NAME` and exactly the
 * parent's --subnet (and --ip-range): it gets the parent's PoolID, and the pool counts one more
 * network sharing it (`shares`). A dual-stack group does so for each family. The gateway is every sharing network's (shared-gateway.ts), and
 * ReleasePool takes one share off before it removes the pool (pools.ts).
 */
import { formatPrefix } from '../../lib/cidr.js';
import { OvsnetError } from '../../lib/errors.js';
import type { Logger } from '../../lib/log.js';
import type { Store } from '../../store/types.js';
import type { PoolIndex } from '../index/pool-index.js';
import { GROUP_OPTION, parsePool } from './pool-checks.js';
import type { PoolRecord } from '../state/records.js';
import { listPools } from '../state/ipam-reads.js';
import { poolTxn, type Stored } from '../state/ipam-txn.js';

const MAX_RETRIES = 64;

export interface GroupPoolRequest {
  readonly addressSpace: string;
  readonly pool: string;
  readonly subPool: string;
  readonly v6: boolean;
  readonly group: string;
}

interface Deps {
  readonly store: Store;
  readonly log: Logger;
  readonly host: string;
}

/** The parent's pool, with one more network sharing it. Refused with what to give instead. */
export async function shareWithGroup(deps: Deps, index: PoolIndex, req: GroupPoolRequest): Promise<{ poolId: string; pool: string }> {
  const opt = `--ipam-opt ${GROUP_OPTION}=${req.group}`;
  if (req.pool === '') {
    throw new OvsnetError('IPAM_POOL_INVALID', `${opt} needs --subnet: the parent network's subnet, whose pool the group shares`);
  }
  const pool = formatPrefix(parsePool(req.pool, 'Pool'));
  const sub = req.subPool === '' ? undefined : formatPrefix(parsePool(req.subPool, 'SubPool (--ip-range)'));
  for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
    const listed = await listPools(deps.store);
    const found = listed.find(
      ({ record: r }) =>
        r.addressSpace === req.addressSpace &&
        r.pool === pool &&
        r.v6 === req.v6 &&
        (r.logical === undefined ? r.host === deps.host : (r.users ?? []).includes(deps.host)),
    );
    const parent = found?.record;
    if (parent === undefined) {
      throw new OvsnetError(
        'IPAM_GROUP_NO_PARENT',
        `${opt}: this host has no ovsnet pool ${pool}; create the parent first (docker network create -d ovsnet --ipam-driver ovsnet --subnet ${pool} -o ovsnet.network=PARENT ...) and give the group the parent's --subnet`,
      );
    }
    if (parent.subPool !== sub) {
      throw new OvsnetError(
        'IPAM_POOL_INVALID',
        `${opt}: the parent's pool ${pool} has ${parent.subPool === undefined ? 'no --ip-range' : `--ip-range ${parent.subPool}`}; give the group the same`,
      );
    }
    if (found !== undefined && (await addShare(deps, index, found, 1))) {
      deps.log.info({ poolId: parent.poolId, group: req.group }, 'endpoint group shares its parent pool');
      return { poolId: parent.poolId, pool: parent.pool };
    }
  }
  throw new OvsnetError('NOT_READY', `pool ${pool} is changing too fast to share with group ${req.group}; retry the network creation`);
}

/** The pool with `delta` more shares: a one-host pool's, or `host`'s in a logical network's pool. Pure. */
export function shared(record: PoolRecord, host: string, delta: 1 | -1): PoolRecord {
  if (record.logical === undefined) {
    const shares = (record.shares ?? 0) + delta;
    const { shares: _dropped, ...rest } = record;
    return shares > 0 ? { ...rest, shares } : rest;
  }
  const { [host]: mine = 0, ...others } = record.hostShares ?? {};
  const hostShares = mine + delta > 0 ? { ...others, [host]: mine + delta } : others;
  const { hostShares: _dropped, ...rest } = record;
  return Object.keys(hostShares).length > 0 ? { ...rest, hostShares } : rest;
}

/** Adds `delta` to the pool's shares (`host`'s, in a logical pool) in one compared write; false if the record moved meanwhile. */
export async function addShare(
  deps: Pick<Deps, 'store' | 'host'>,
  index: PoolIndex,
  stored: Stored<PoolRecord>,
  delta: 1 | -1,
): Promise<boolean> {
  const { record } = stored;
  const next = shared(record, deps.host, delta);
  const res = await deps.store.txn({ compares: [poolTxn.unchanged(record.poolId, stored.modRevision)], success: [poolTxn.put(next)] });
  if (!res.succeeded) return false;
  // The index knows the share before the group's gateway request comes.
  index.apply({ type: 'put', kv: poolTxn.written(next, { ...stored, modRevision: res.revision, version: stored.version + 1 }) });
  return true;
}
