/**
 * CreateEndpoint's binding of its addresses' reservations when it could not ride in the record's
 * own transaction (driver-records.ts createBound): one bind per address, best effort (the reaper
 * judges a reservation never bound a grace period later), except that an address the IPAM
 * refuses (it went to another holder meanwhile: ipam-driver/allocation/bind-again.ts) refuses the
 * endpoint.
 */
import { isOvsnetError, type OvsnetError } from '../../lib/errors.js';
import type { TxnPart } from './txn-parts.js';

/** The IPAM as CreateEndpoint binds with it (Ipam.bindOps, Ipam.bindEndpoint). */
export interface BindingPools {
  bindOps?(address: string, endpointId: string): TxnPart | undefined;
  bindEndpoint(address: string, endpointId: string): Promise<boolean>;
}

/** Binds each address; returns the IPAM's refusal of one (the caller undoes its record and throws it), else undefined. */
export async function bindEach(
  addresses: readonly string[],
  endpointId: string,
  pools: BindingPools | undefined,
  bestEffort: (what: string, fn: () => Promise<void>) => Promise<void>,
): Promise<OvsnetError | undefined> {
  for (const a of addresses) {
    let refused: OvsnetError | undefined;
    await bestEffort('bind the reservation', async () => {
      try {
        await pools?.bindEndpoint(a, endpointId);
      } catch (err) {
        if (!isOvsnetError(err) || err.code !== 'IPAM_ADDRESS_TAKEN') throw err;
        refused = err;
      }
    });
    if (refused !== undefined) return refused;
  }
  return undefined;
}
