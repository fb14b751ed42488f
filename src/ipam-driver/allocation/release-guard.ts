/**
 * Docker's ReleaseAddress carries only the pool and the address, so a late one (sent after the
 * address was handed out again) names the new holder's address. Tombstones answer the usual
 * case (state/tombstones.ts); this guard answers the rest (DeleteEndpoint deleted its record
 * alone, a tombstone expired or was lost): a reservation bound (bind-endpoint.ts) to an endpoint
 * whose record still exists is not freed. Docker is answered success all the same: the address
 * stays with its holder, which is what a release of someone else's address should leave.
 *
 * The IPAM never reads the driver's keys: the composition root (daemon/assemble.ts) hands it
 * `endpointExists`, which the driver's records answer from their copy (no store call for an
 * endpoint this process created or deleted), else by a read. The test runs on the reservation
 * the release's transaction compares (judged-release.ts), so a binding changed between the test
 * and the write fails the compare and is tested again.
 *
 * Which records the local driver can know: a host releases only its own reservations (a shared
 * pool's partOf leaves another host's alone, and a one-host pool is its host's), and Docker's
 * IPAM calls and CreateEndpoint run on the same host, so the endpoint a releasable reservation
 * is bound to is this host's, and its record is one this host's driver writes.
 */
import type { Logger } from '../../lib/log.js';
import { holderOf, releasableByDocker } from '../state/holder-keys.js';
import type { Reservation } from '../state/records.js';
import type { Judge } from './judged-release.js';

/** Whether endpoint `endpointId`'s record exists; `address` (plain form) says which networks to look in when it is not known already. */
export type EndpointExists = (endpointId: string, address: string) => boolean | Promise<boolean>;

export interface GuardDeps {
  readonly log: Logger;
  /** Absent (an IPAM without a network driver beside it): bound reservations are released as any other. */
  readonly endpointExists?: EndpointExists;
}

/** The test of Docker's release of `address` in `poolId`: never a CNI attachment's, never one bound to an endpoint whose record exists. */
export function dockerReleaseTest(deps: GuardDeps, poolId: string, address: string): Judge {
  const test = async (r: Reservation): Promise<boolean> => {
    if (!releasableByDocker(holderOf(r))) return false;
    if (r.endpoint === undefined || deps.endpointExists === undefined) return true;
    if (!(await deps.endpointExists(r.endpoint, address))) return true;
    deps.log.info(
      { poolId, address, endpointId: r.endpoint },
      `ReleaseAddress of ${address}: kept, it is bound to endpoint ${r.endpoint.slice(0, 12)} whose record exists (a late release, sent after the address was handed out again); Docker is answered success`,
    );
    return false;
  };
  return Object.assign(test, { freesMalformed: true }); // a record no test can read: as before the guard, Docker's release frees it
}
