/**
 * The one release path. Its two entries: by address (Docker's ReleaseAddress, which never frees
 * a CNI attachment's address; reaping and settling give their own test of the record) and by
 * holder key (a CNI DEL or GC: only what that key holds). Both come to releaseOne, which keeps
 * a shared gateway (shared-gateway.ts), leaves a sticky record in a sticky pool, and keeps the
 * holder index current. Idempotent: a second release frees nothing.
 */
import { formatAddress } from '../../lib/cidr.js';
import { addressIn } from './address-checks.js';
import type { KeyedDeps } from './allocator.js';
import { isSticky } from './allocator.js';
import { holderOf, holders, releasableByDocker, stickyKeyOf } from '../state/holder-keys.js';
import type { Reservation } from '../state/records.js';
import { stickyTxn } from '../state/ipam-txn.js';
import { keepsGateway } from './shared-gateway.js';

export type ReleaseDeps = Pick<KeyedDeps, 'store' | 'host' | 'now' | 'holders' | 'usable' | 'strategy'>;

export class Release {
  constructor(private readonly deps: ReleaseDeps) {}

  /**
   * Releases the address when its reservation passes `onlyIf` (default: Docker's release, which
   * frees no CNI attachment's address). True when it was released.
   */
  byAddress(poolId: string, address: string, onlyIf?: (r: Reservation) => boolean): Promise<boolean> {
    return this.releaseOne(poolId, address, onlyIf);
  }

  /** Releases whatever `holder` holds (in `poolId` only, when given); returns the addresses freed. */
  async byHolder(holder: string, poolId?: string): Promise<string[]> {
    const freed: string[] = [];
    for (const h of this.deps.holders.held(holder)) {
      if (poolId !== undefined && h.poolId !== poolId) continue;
      if (await this.releaseOne(h.poolId, h.address, (r) => holderOf(r) === holder)) freed.push(h.address);
    }
    return freed;
  }

  private async releaseOne(poolId: string, address: string, onlyIf?: (r: Reservation) => boolean): Promise<boolean> {
    const pool = await this.deps.usable(poolId);
    if (pool === undefined) return false; // the pool is gone (its reservations with it), or another host's
    const value = addressIn(pool, address);
    const plain = formatAddress(pool.prefix.family, value);
    const known = this.deps.holders.holderAt(poolId, plain);
    if (known === holders.dockerGateway && keepsGateway(pool.record, this.deps.host)) return false;
    const strategy = this.deps.strategy(pool);
    // Docker's release of an address the index says is Docker's: no record to read first.
    if (onlyIf === undefined && !isSticky(pool) && (known === undefined || releasableByDocker(known))) {
      await strategy.release(pool, value);
      this.deps.holders.forget(poolId, plain);
      return true;
    }
    const test = onlyIf ?? ((r: Reservation) => releasableByDocker(holderOf(r)));
    let passed: Reservation | undefined;
    await strategy.release(pool, value, (r) => {
      passed = test(r) ? r : undefined;
      return passed !== undefined;
    });
    if (passed === undefined) return false;
    this.deps.holders.forget(poolId, plain);
    const key = isSticky(pool) ? stickyKeyOf(passed) : undefined;
    if (key !== undefined) {
      const record = { address: plain, releasedAt: this.deps.now().toISOString() };
      await this.deps.store.txn({ compares: [], success: [stickyTxn.put(poolId, key, record)] });
    }
    return true;
  }
}
