/**
 * Pools: RequestPool and ReleasePool. Creation and release bump the address space's key, and
 * an overlap check counts only if that key did not move in between, so two processes sharing a
 * store never create overlapping pools. Dynamic pools come from OVSNET_DEFAULT_POOLS (carve.ts).
 */
import type { DefaultPool } from '../../config/config.js';
import { formatPrefix, parseCidr, type Family, type Prefix } from '../../lib/cidr.js';
import type { HostNet, MinPrefix } from '../../lib/subnets.js';
import { OvsnetError } from '../../lib/errors.js';
import type { Logger } from '../../lib/log.js';
import type { Compare, Op, Store } from '../../store/types.js';
import { nextPool } from './carve.js';
import type { PoolIndex } from '../index/pool-index.js';
import { poolUsableBy, type PoolRecord } from '../state/records.js';
import { listPools, readCursor, readPool, readSpace } from '../state/ipam-reads.js';
import { cursorTxn, poolTxn, spaceTxn, type Stored } from '../state/ipam-txn.js';
import { checkHost, checkOptions, checkPool, checkSpace, GROUP_OPTION, normalOptions, parsePool } from './pool-checks.js';

import { poolIdOf } from './pool-id.js';
import { addShare, shareWithGroup } from './group-pool.js';

export { IPAM_OPTIONS } from './pool-checks.js';
export { ADDRESS_SPACES, poolIdOf } from './pool-id.js';

export interface PoolRequest {
  readonly addressSpace: string;
  readonly pool: string;
  readonly subPool: string;
  readonly options: Readonly<Record<string, string>>;
  readonly v6: boolean;
}

export interface PoolsDeps {
  readonly store: Store;
  readonly log: Logger;
  readonly host: string;
  readonly defaultPools: readonly DefaultPool[];
  /** The host's addresses and routes (host-nets.ts): no pool overlaps them. */
  readonly hostNets: () => readonly HostNet[];
  /** OVSNET_MIN_PREFIX. */
  readonly minPrefix: MinPrefix;
  readonly now: () => Date;
}

const MAX_RETRIES = 64;

/** A pool about to be created, and for a dynamic one the cursor move that goes with it. */
interface Chosen {
  readonly pool: Prefix;
  readonly sub?: Prefix;
  readonly cursor?: bigint;
  readonly cursorCompare?: readonly Compare[];
}

export class Pools {
  constructor(
    private readonly deps: PoolsDeps,
    private readonly index: PoolIndex,
  ) {}

  async request(req: PoolRequest, token: string): Promise<{ poolId: string; pool: string }> {
    const space = checkSpace(req.addressSpace);
    checkOptions(req.options);
    const group = req.options[GROUP_OPTION];
    if (group !== undefined) return shareWithGroup(this.deps, this.index, { ...req, addressSpace: space, group });
    for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
      const spaceKv = await readSpace(this.deps.store, space);
      const listed = await listPools(this.deps.store);
      const existing = listed.map((p) => p.record);
      const logical = req.pool === '' ? undefined : this.logicalPool(req, space, existing);
      if (logical !== undefined) {
        // A host already in it is refused by join() with that reason, not as an overlap with its own gateway.
        if (!(logical.users ?? []).includes(this.deps.host)) {
          checkHost(
            parseCidr(logical.pool),
            req.options,
            existing.filter((r) => r.poolId !== logical.poolId),
            this.deps,
          );
        }
        if (await this.join(logical, listed.find((p) => p.record.poolId === logical.poolId)?.modRevision ?? 0))
          return { poolId: logical.poolId, pool: logical.pool };
        continue;
      }
      const chosen: Chosen = req.pool === '' ? await this.choosePool(req.v6, existing) : checkPool(req, existing, this.deps);
      const poolId = poolIdOf(space, chosen.pool, chosen.sub);
      const record: PoolRecord = {
        poolId,
        addressSpace: space,
        pool: formatPrefix(chosen.pool),
        ...(chosen.sub === undefined ? {} : { subPool: formatPrefix(chosen.sub) }),
        v6: chosen.pool.family === 6,
        dynamic: req.pool === '',
        options: normalOptions(req.options),
        host: this.deps.host,
        createdAt: this.deps.now().toISOString(),
        token,
      };
      const ops: Op[] = [poolTxn.put(record), spaceTxn.bump(space, spaceKv.version)];
      if (chosen.cursor !== undefined) ops.push(cursorTxn.put(chosen.pool.family, chosen.cursor));
      const res = await this.deps.store.txn({
        compares: [spaceTxn.unchanged(space, spaceKv.modRevision), ...(chosen.cursorCompare ?? [])],
        success: ops,
      });
      if (res.succeeded) {
        const meta = { createRevision: res.revision, modRevision: res.revision, version: 1 };
        this.index.apply({ type: 'put', kv: poolTxn.written(record, meta) });
        this.deps.log.info({ poolId, dynamic: record.dynamic }, 'pool requested');
        return { poolId, pool: record.pool };
      }
    }
    throw new OvsnetError('NOT_READY', 'pools are being created too fast by other hosts to pick one; retry the network creation');
  }

  /**
   * Releases the pool for `host` (this one, or a dead one being reclaimed): a logical network's
   * pool loses that user and goes with the last one; any other pool goes at once.
   */
  async release(poolId: string, host = this.deps.host): Promise<void> {
    for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
      const stored = await readPool(this.deps.store, poolId);
      if (stored === undefined) return; // already released: idempotent
      const { record } = stored;
      if (record.logical === undefined && host !== this.deps.host) return; // only shared pools are reclaimed
      if (!poolUsableBy(record, this.deps.host)) return; // another host's pool: not found here, nothing released
      // An endpoint group (or its parent) leaves a pool others still share: one share less.
      const mine = record.logical === undefined ? (record.shares ?? 0) : (record.hostShares?.[host] ?? 0);
      if (mine > 0 && host === this.deps.host) {
        if (await addShare(this.deps, this.index, stored, -1))
          return void this.deps.log.info({ poolId }, 'a network left the pool it shares');
        continue;
      }
      if (record.logical !== undefined) {
        // A logical network's pool stays while another host's network uses it.
        const users = record.users ?? [];
        if (!users.includes(host)) return; // not a user: released already
        const others = users.filter((u) => u !== host);
        if (others.length > 0) {
          // A dead host reclaimed: its groups' shares go with it.
          const { [host]: _gone, ...hostShares } = record.hostShares ?? {};
          const { hostShares: _all, ...rest } = record;
          const next = Object.keys(hostShares).length > 0 ? { ...rest, users: others, hostShares } : { ...rest, users: others };
          const res = await this.deps.store.txn({
            compares: [poolTxn.unchanged(poolId, stored.modRevision)],
            success: [poolTxn.put(next)],
          });
          if (res.succeeded) {
            this.deps.log.info({ poolId, host, users: others }, 'left the shared pool of a logical network');
            return;
          }
          continue;
        }
      }
      if (await this.remove(stored)) return;
    }
    throw new OvsnetError(
      'NOT_READY',
      `pool ${poolId} could not be released while other pools change; Docker retries on the next network removal`,
    );
  }

  /** The logical network's pool that is exactly this request's, if any. */
  private logicalPool(req: PoolRequest, space: string, existing: readonly PoolRecord[]): PoolRecord | undefined {
    const pool = formatPrefix(parsePool(req.pool, 'Pool'));
    const sub = req.subPool === '' ? undefined : formatPrefix(parsePool(req.subPool, 'SubPool (--ip-range)'));
    return existing.find((r) => r.logical !== undefined && r.addressSpace === space && r.pool === pool && r.subPool === sub);
  }

  /** This host becomes a user of a logical network's pool; false if the record moved meanwhile. */
  private async join(record: PoolRecord, modRevision: number): Promise<boolean> {
    const users = record.users ?? [];
    if (users.includes(this.deps.host)) {
      throw new OvsnetError(
        'IPAM_POOL_OVERLAP',
        `pool ${record.pool} is already used on this host by logical network ${record.logical ?? '?'}: a host takes part in a logical network with one Docker network`,
      );
    }
    const joined: PoolRecord = { ...record, users: [...users, this.deps.host] };
    const res = await this.deps.store.txn({ compares: [poolTxn.unchanged(record.poolId, modRevision)], success: [poolTxn.put(joined)] });
    if (!res.succeeded) return false;
    // The index must know the pool is shared before this host's first RequestAddress.
    this.index.apply({ type: 'put', kv: poolTxn.written(joined, { createRevision: 0, modRevision: res.revision, version: 0 }) });
    this.deps.log.info({ poolId: record.poolId, logical: record.logical }, 'joined the shared pool of a logical network');
    return true;
  }

  /** Deletes the pool and everything under it; false if the pool or its space moved meanwhile. */
  private async remove(stored: Stored<PoolRecord>): Promise<boolean> {
    const { poolId, addressSpace } = stored.record;
    const spaceKv = await readSpace(this.deps.store, addressSpace);
    const res = await this.deps.store.txn({
      compares: [spaceTxn.unchanged(addressSpace, spaceKv.modRevision), poolTxn.unchanged(poolId, stored.modRevision)],
      success: [...poolTxn.removeAll(poolId), spaceTxn.bump(addressSpace, spaceKv.version)],
      failure: [poolTxn.get(poolId)],
    });
    if (res.succeeded || res.gets[0] === undefined) {
      this.index.pools.delete(poolId);
      if (res.succeeded) this.deps.log.info({ poolId }, 'pool released');
      return true;
    }
    return false;
  }

  private async choosePool(v6: boolean, existing: readonly PoolRecord[]): Promise<Chosen> {
    const family: Family = v6 ? 6 : 4;
    const cursor = await readCursor(this.deps.store, family);
    const taken = [...existing.map((r) => parseCidr(r.pool)), ...this.deps.hostNets().map((h) => h.prefix)];
    const found = nextPool(this.deps.defaultPools, family, cursor.next, taken);
    if (found === undefined) {
      const ranges = this.deps.defaultPools.filter((p) => p.range.family === family).map((p) => `${formatPrefix(p.range)}:${p.bits}`);
      throw new OvsnetError(
        'IPAM_NO_FREE_POOL',
        ranges.length === 0
          ? `no IPv${family} default pool is configured: pass --subnet, or add an IPv${family} range to OVSNET_DEFAULT_POOLS`
          : `every pool of OVSNET_DEFAULT_POOLS (${ranges.join(',')}) overlaps a network or a host route: pass --subnet, or add ranges`,
      );
    }
    return { pool: found.prefix, cursor: found.next, cursorCompare: [cursorTxn.unchanged(family, cursor.modRevision)] };
  }
}
