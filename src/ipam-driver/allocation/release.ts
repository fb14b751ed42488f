/**
 * The one release path. Its two entries: by address (Docker's ReleaseAddress, which never frees
 * a CNI attachment's address nor one bound to an endpoint whose record exists: release-guard.ts;
 * reaping and settling give their own test of the record) and by holder key (a CNI DEL or GC:
 * only what that key holds). Both come to releaseOne, which keeps a shared gateway
 * (shared-gateway.ts), leaves a sticky record in a sticky pool, and keeps the holder index
 * current. Every test is judged on the record the transaction compares (judged-release.ts).
 * Idempotent: a second release frees nothing.
 */
import { formatAddress } from '../../lib/cidr.js';
import { addressIn } from './address-checks.js';
import type { KeyedDeps } from './allocator.js';
import { isSticky } from './allocator.js';
import { holderOf, holders, stickyKeyOf } from '../state/holder-keys.js';
import type { Reservation } from '../state/records.js';
import { stickyTxn } from '../state/ipam-txn.js';
import { keepsGateway } from './shared-gateway.js';
import { dockerReleaseTest, type GuardDeps } from './release-guard.js';
import type { Judge } from './judged-release.js';

export type ReleaseDeps = Pick<KeyedDeps, 'store' | 'host' | 'now' | 'holders' | 'usable' | 'strategy'> & GuardDeps;

export class Release {
  constructor(private readonly deps: ReleaseDeps) {}

  /**
   * Releases the address when its reservation passes `onlyIf` (default: Docker's release, which
   * frees no CNI attachment's address and none bound to an endpoint whose record exists:
   * release-guard.ts). True when it was released.
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
    // Docker's release: its guard (release-guard.ts), judged on the record the transaction compares.
    const test: Judge = onlyIf ?? dockerReleaseTest(this.deps, poolId, plain);
    let passed: Reservation | undefined;
    const judge = async (r: Reservation) => {
      passed = (await test(r)) ? r : undefined;
      return passed !== undefined;
    };
    const released = await this.deps
      .strategy(pool)
      .release(pool, value, Object.assign(judge, { freesMalformed: test.freesMalformed === true }));
    if (released !== 'kept') this.deps.holders.forget(poolId, plain);
    if (released !== 'freed') return false;
    const key = isSticky(pool) && passed !== undefined ? stickyKeyOf(passed) : undefined;
    if (key !== undefined) {
      const record = { address: plain, releasedAt: this.deps.now().toISOString() };
      await this.deps.store.txn({ compares: [], success: [stickyTxn.put(poolId, key, record)] });
    }
    return true;
  }
}
