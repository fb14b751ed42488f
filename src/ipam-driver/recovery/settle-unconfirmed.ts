/**
 * Settling one unconfirmed IPAM change (unconfirmed.ts keeps them and says when): what a failed
 * request may still have made is found by its token and released; a failed release is done
 * again, for the reservation Docker released only. Each step is idempotent, so a doubt settled
 * twice (a restart between the look and the journal's rewrite) does no harm.
 */
import type { Logger } from '../../lib/log.js';
import type { Store } from '../../store/types.js';
import type { Doubt, Settled } from './unconfirmed.js';
import type { Reservation } from '../state/records.js';
import { listPools, listReservations } from '../state/ipam-reads.js';
import { holderOf, releasableByDocker } from '../state/holder-keys.js';

export interface SettleDeps {
  readonly store: Store;
  readonly log: Logger;
  /** This host: only its own reservations are released again. */
  readonly host: string;
  /** Releases a pool; idempotent. */
  readonly releasePool: (poolId: string) => Promise<void>;
  /** Releases an address of a pool, only when its reservation passes `onlyIf`; idempotent. */
  readonly releaseAddress: (poolId: string, address: string, onlyIf: (r: Reservation) => boolean) => Promise<void>;
}

export async function settleDoubt(deps: SettleDeps, d: Doubt): Promise<Settled> {
  switch (d.kind) {
    case 'pool': {
      const made = (await listPools(deps.store)).map((p) => p.record).filter((p) => p.token === d.token);
      for (const p of made) {
        await deps.releasePool(p.poolId);
        deps.log.warn({ poolId: p.poolId }, 'released a pool created by a request that failed while the store was unreachable');
      }
      return made.length > 0 ? 'undone' : 'nothing';
    }
    case 'release':
      // Only the reservation Docker released: this host's and Docker's, made before the failed release.
      await deps.releaseAddress(
        d.poolId,
        d.address,
        (r) => r.host === deps.host && Date.parse(r.reservedAt) <= d.at.getTime() && releasableByDocker(holderOf(r)),
      );
      return 'undone';
    case 'request': {
      const made = (await listReservations(deps.store, d.poolId)).filter((r) => r.token === d.token);
      for (const r of made) {
        await deps.releaseAddress(d.poolId, r.address, (cur) => cur.token === d.token);
        deps.log.warn(
          { poolId: d.poolId, address: r.address },
          'released an address reserved by a request that failed while the store was unreachable',
        );
      }
      return made.length > 0 ? 'undone' : 'nothing';
    }
  }
}
