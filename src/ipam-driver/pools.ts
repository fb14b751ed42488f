/**
 * Pools: RequestPool and ReleasePool. Creation and release bump the address space's key, and
 * an overlap check counts only if that key did not move in between, so two processes sharing a
 * store never create overlapping pools. Dynamic pools come from OVSNET_DEFAULT_POOLS (carve.ts).
 */
import type { DefaultPool } from '../config.js';
import { CidrError, contains, formatPrefix, overlaps, parseCidr, type Family, type Prefix } from '../cidr.js';
import { OvsnetError } from '../errors.js';
import type { Logger } from '../log.js';
import { keys } from '../store/keys.js';
import { del, get, modRevisionIs, put, type Compare, type Op, type Store } from '../store/types.js';
import { nextPool } from './carve.js';
import type { PoolIndex } from './pool-index.js';
import { parseRecord, type PoolRecord } from './records.js';

export const ADDRESS_SPACES = { local: 'LocalDefault', global: 'GlobalDefault' } as const;

/** `--ipam-opt` keys of ovsnet; other keys (Docker's own) pass through untouched. */
export const IPAM_OPTIONS: readonly string[] = [];

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
  readonly hostRoutes: () => Prefix[];
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

  async request(req: PoolRequest): Promise<{ poolId: string; pool: string }> {
    const space = checkSpace(req.addressSpace);
    checkOptions(req.options);
    for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
      const spaceKv = await this.deps.store.get(keys.space(space));
      const existing = (await this.deps.store.list(keys.pools)).kvs.map((kv) => parseRecord<PoolRecord>(kv.value, 'pool'));
      const chosen: Chosen = req.pool === '' ? await this.choosePool(req.v6, existing) : this.checkPool(req, space, existing);
      const poolId = poolIdOf(space, chosen.pool, chosen.sub);
      const record: PoolRecord = {
        poolId,
        addressSpace: space,
        pool: formatPrefix(chosen.pool),
        ...(chosen.sub === undefined ? {} : { subPool: formatPrefix(chosen.sub) }),
        v6: chosen.pool.family === 6,
        dynamic: req.pool === '',
        options: { ...req.options },
        host: this.deps.host,
        createdAt: this.deps.now().toISOString(),
      };
      const ops: Op[] = [put(keys.pool(poolId), JSON.stringify(record)), put(keys.space(space), String((spaceKv?.version ?? 0) + 1))];
      if (chosen.cursor !== undefined) ops.push(put(keys.poolCursor(chosen.pool.family), chosen.cursor.toString()));
      const res = await this.deps.store.txn({
        compares: [modRevisionIs(keys.space(space), spaceKv?.modRevision ?? 0), ...(chosen.cursorCompare ?? [])],
        success: ops,
      });
      if (res.succeeded) {
        this.index.apply({ type: 'put', kv: { key: keys.pool(poolId), value: JSON.stringify(record), createRevision: res.revision, modRevision: res.revision, version: 1, lease: '0' } });
        this.deps.log.info({ poolId, dynamic: record.dynamic }, 'pool requested');
        return { poolId, pool: record.pool };
      }
    }
    throw new OvsnetError('NOT_READY', 'pools are being created too fast by other hosts to pick one; retry the network creation');
  }

  async release(poolId: string): Promise<void> {
    const kv = await this.deps.store.get(keys.pool(poolId));
    if (kv === undefined) return; // already released: idempotent
    const record = parseRecord<PoolRecord>(kv.value, 'pool');
    const spaceKey = keys.space(record.addressSpace);
    for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
      const spaceKv = await this.deps.store.get(spaceKey);
      const res = await this.deps.store.txn({
        compares: [modRevisionIs(spaceKey, spaceKv?.modRevision ?? 0), { key: keys.pool(poolId), target: 'present' }],
        success: [
          del(keys.pool(poolId)),
          { type: 'deletePrefix', prefix: keys.addresses(poolId) },
          del(keys.poolCount(poolId)),
          put(spaceKey, String((spaceKv?.version ?? 0) + 1)),
        ],
        failure: [get(keys.pool(poolId))],
      });
      if (res.succeeded || res.gets[0] === undefined) {
        this.index.pools.delete(poolId);
        if (res.succeeded) this.deps.log.info({ poolId }, 'pool released');
        return;
      }
    }
    throw new OvsnetError('NOT_READY', `pool ${poolId} could not be released while other pools change; Docker retries on the next network removal`);
  }

  private checkPool(req: PoolRequest, space: string, existing: readonly PoolRecord[]): Chosen {
    const pool = parsePool(req.pool, 'Pool');
    if ((pool.family === 6) !== req.v6) {
      throw new OvsnetError('IPAM_POOL_INVALID', `pool ${req.pool} is IPv${pool.family} but the request is for IPv${req.v6 ? 6 : 4}`);
    }
    if (pool.family === 6 && pool.bits > 64) {
      throw new OvsnetError('IPAM_POOL_INVALID', `IPv6 pool ${req.pool} is too small: ovsnet takes IPv6 pools of /64 or larger (a shorter prefix)`);
    }
    let sub: Prefix | undefined;
    if (req.subPool !== '') {
      sub = parsePool(req.subPool, 'SubPool (--ip-range)');
      if (!contains(pool, sub)) {
        throw new OvsnetError('IPAM_POOL_INVALID', `--ip-range ${req.subPool} is not inside --subnet ${formatPrefix(pool)}: give a range within the subnet`);
      }
    }
    for (const other of existing) {
      if (other.addressSpace === space && overlaps(pool, parseCidr(other.pool))) {
        throw new OvsnetError(
          'IPAM_POOL_OVERLAP',
          `pool ${formatPrefix(pool)} overlaps pool ${other.pool} (${other.poolId}) already in use in address space ${space}: choose a subnet that overlaps no other network's`,
        );
      }
    }
    return sub === undefined ? { pool } : { pool, sub };
  }

  private async choosePool(v6: boolean, existing: readonly PoolRecord[]): Promise<Chosen> {
    const family: Family = v6 ? 6 : 4;
    const cursorKv = await this.deps.store.get(keys.poolCursor(family));
    const taken = [...existing.map((r) => parseCidr(r.pool)), ...this.deps.hostRoutes()];
    const found = nextPool(this.deps.defaultPools, family, BigInt(cursorKv?.value ?? '0'), taken);
    if (found === undefined) {
      const ranges = this.deps.defaultPools.filter((p) => p.range.family === family).map((p) => `${formatPrefix(p.range)}:${p.bits}`);
      throw new OvsnetError(
        'IPAM_NO_FREE_POOL',
        ranges.length === 0
          ? `no IPv${family} default pool is configured: pass --subnet, or add an IPv${family} range to OVSNET_DEFAULT_POOLS`
          : `every pool of OVSNET_DEFAULT_POOLS (${ranges.join(',')}) overlaps a network or a host route: pass --subnet, or add ranges`,
      );
    }
    return { pool: found.prefix, cursor: found.next, cursorCompare: [modRevisionIs(keys.poolCursor(family), cursorKv?.modRevision ?? 0)] };
  }
}

export function poolIdOf(space: string, pool: Prefix, sub: Prefix | undefined): string {
  return `${space}/${formatPrefix(pool)}${sub === undefined ? '' : `/${formatPrefix(sub)}`}`;
}

function checkSpace(space: string): string {
  if (space === '') return ADDRESS_SPACES.local;
  if (space !== ADDRESS_SPACES.local && space !== ADDRESS_SPACES.global) {
    throw new OvsnetError('IPAM_ADDRESS_SPACE_INVALID', `address space ${JSON.stringify(space)} is not one of ovsnet's: ${ADDRESS_SPACES.local}, ${ADDRESS_SPACES.global}`);
  }
  return space;
}

function checkOptions(options: Readonly<Record<string, string>>): void {
  for (const key of Object.keys(options)) {
    if (key.startsWith('ovsnet.') && !IPAM_OPTIONS.includes(key)) {
      const valid = IPAM_OPTIONS.length === 0 ? 'ovsnet IPAM takes no ovsnet.* options in this version' : `valid ones: ${IPAM_OPTIONS.join(', ')}`;
      throw new OvsnetError('IPAM_OPTION_INVALID', `--ipam-opt ${key} is not an ovsnet IPAM option: ${valid}`);
    }
  }
}

function parsePool(text: string, field: string): Prefix {
  try {
    const p = parseCidr(text);
    return { family: p.family, base: p.base, bits: p.bits };
  } catch (err) {
    throw new OvsnetError('IPAM_POOL_INVALID', `${field}: ${err instanceof CidrError ? err.message : String(err)}`);
  }
}
