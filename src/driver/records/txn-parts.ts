/**
 * Parts another module adds to the driver's record transactions (driver-records.ts): the IPAM's
 * binding of a reservation to the endpoint in CreateEndpoint's, and its release of the
 * endpoint's addresses in DeleteEndpoint's. Pure.
 */
import type { Compare, Op } from '../../store/types.js';
import type { EndpointRecord } from '../model/records.js';

/** Compares and writes another module adds to one of these transactions. */
export interface TxnPart {
  readonly compares: readonly Compare[];
  readonly success: readonly Op[];
}

export const joinParts = (parts: readonly TxnPart[]): TxnPart => ({
  compares: parts.flatMap((p) => p.compares),
  success: parts.flatMap((p) => p.success),
});

/** A part whose owner is told the transaction's outcome. */
export type TxnPartDone = TxnPart & { done(ok: boolean, revision: number): void };

/**
 * The release of every address of the endpoint as parts of DeleteEndpoint's transaction
 * (Ipam.releaseOps); undefined unless each address can go that way (then ReleaseAddress does
 * what the IPAM did not).
 */
export function releaseOf(
  pools: { releaseOps?(address: string, endpointId: string): TxnPartDone | undefined } | undefined,
  ep: EndpointRecord,
): TxnPartDone | undefined {
  const addresses = [ep.address, ep.addressV6].filter((a): a is string => a !== undefined && a !== '');
  const parts = addresses.map((a) => pools?.releaseOps?.(a, ep.endpointId));
  if (parts.length === 0 || parts.some((p) => p === undefined)) {
    for (const p of parts) p?.done(false, 0); // what they took for the transaction goes back
    return undefined;
  }
  const all = parts.filter((p) => p !== undefined);
  return { ...joinParts(all), done: (ok, revision) => all.forEach((p) => p.done(ok, revision)) };
}
