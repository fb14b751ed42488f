/**
 * The release loop both kinds of pool share (one-host-pool.ts, shared-pool.ts). The reservation
 * is judged (`onlyIf`: Docker's release guard, a reaper's or a settling's test) exactly as the
 * transaction then compares it: its value as this process last wrote it (RecentReservations in
 * bind-endpoint.ts: no round trip), else its revision as read; a value as written that the test
 * refuses is read (it may have changed since: bound by bindReservation) and judged again. So a
 * reservation changed between the judgement and the write (bound to another endpoint, released
 * and reserved again) fails the compare, comes back in the failure's get, and is judged again:
 * a release never frees a reservation it did not judge, nor keeps one it did not read.
 */
import { OvsnetError } from '../../lib/errors.js';
import type { Compare, Op, Store, TxnResult } from '../../store/types.js';
import type { Reservation } from '../state/records.js';
import { seeReservation } from '../state/ipam-reads.js';
import { reservationTxn, type Seen } from '../state/ipam-txn.js';

const MAX_RETRIES = 64;

/**
 * A test of the reservation a release would free (it may look elsewhere: the driver's records).
 * `freesMalformed`: a record that does not decode, which no test can read, is freed (Docker's
 * release: the holder map skipped it, nobody can name it); else it is kept.
 */
export interface Judge {
  (r: Reservation): boolean | Promise<boolean>;
  readonly freesMalformed?: boolean;
}

/** What a release did: freed the reservation, found none, or left the one there. */
export type Released = 'freed' | 'absent' | 'kept';

/** The reservations this process wrote last, as written (bind-endpoint.ts RecentReservations). */
export interface Written {
  peek(poolId: string, address: string): string | undefined;
  take(poolId: string, address: string): unknown;
}

/** A release as part of a transaction: its compares and writes, and what to do once it applied. */
export interface StrategyPart {
  readonly compares: readonly Compare[];
  readonly success: readonly Op[];
  applied(revision: number): void;
}

/** What one kind of pool adds to the loop. */
export interface ReleaseSteps {
  /**
   * The release of `r` (undefined: a record that does not decode), compared by `unchanged`;
   * undefined when this pool does not release it (another host's, a kept gateway).
   */
  part(r: Reservation | undefined, unchanged: Compare): StrategyPart | undefined;
  /** Gets a failed transaction answers after the reservation's (the count, or the block). */
  readonly failure: readonly Op[];
  /** Takes up a failed transaction's answers (its gets after the reservation's). */
  refresh(res: TxnResult): void;
  /** The address is not reserved. */
  free(): void;
  /** The release, for the error when contention outlasts the retries. */
  readonly what: string;
}

export async function judgedRelease(
  store: Store,
  written: Written | undefined,
  poolId: string,
  address: string,
  onlyIf: Judge,
  steps: ReleaseSteps,
): Promise<Released> {
  const known = written?.peek(poolId, address);
  let held: Seen | undefined = known === undefined ? await seeReservation(store, poolId, address) : undefined;
  for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
    const json = attempt === 0 ? known : undefined;
    if (held === undefined && json === undefined) {
      steps.free();
      return 'absent'; // not reserved: a second release moves nothing
    }
    const r = held === undefined ? (JSON.parse(json ?? '{}') as Reservation) : held.record;
    if (!(r === undefined ? onlyIf.freesMalformed === true : await onlyIf(r))) {
      if (held !== undefined) return 'kept';
      // Refused as this process wrote it: what is stored may have changed since (bound
      // elsewhere, by bindReservation): judged again as read.
      held = await seeReservation(store, poolId, address);
      continue;
    }
    const part = steps.part(
      r,
      held === undefined
        ? reservationTxn.valueIs(poolId, address, json ?? '')
        : reservationTxn.unchanged(poolId, address, held.modRevision),
    );
    if (part === undefined) return 'kept';
    const res = await store.txn({
      compares: part.compares,
      success: part.success,
      failure: [reservationTxn.get(poolId, address), ...steps.failure],
    });
    if (res.succeeded) {
      part.applied(res.revision);
      written?.take(poolId, address);
      return 'freed';
    }
    held = reservationTxn.see(res.gets[0]);
    steps.refresh(res);
  }
  throw new OvsnetError('NOT_READY', `${steps.what} could not be released under contention; retry`);
}
