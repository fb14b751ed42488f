/**
 * The reservation records this process wrote last, by store key, with the exact text written.
 * The watch brings each write back (etcd's watch, the embedded store's dispatch); an event whose
 * value is that text holds this process's own record, which IndexSync applies from the record
 * it has rather than decoding the text again (JSON.parse, the shape check, the key's parse: a
 * third of the watch path's cost per container). Decoding that text would give the same record,
 * so the index ends the same whichever way, in whatever order the event and the write's answer
 * arrive. Anything else is decoded as before: another host's record (its host, token and time
 * differ), a later record of the key, a delete.
 *
 * A record is noted when it is made, before its write is confirmed (the text is the same either
 * way); each is used by one event, and at most LIMIT are kept (the oldest go first), so records
 * never written cost nothing but their place.
 */
import { ipamKeys } from '../state/ipam-keys.js';
import type { Reservation } from '../state/records.js';

/** How many records are kept until their event comes back. */
const LIMIT = 1024;

export class OwnReservations {
  private readonly byKey = new Map<string, { readonly text: string; readonly record: Reservation }>();

  /** `record` is about to be written as `text` (what reservationTxn.put writes: its JSON). */
  wrote(record: Reservation, text: string = JSON.stringify(record)): void {
    const key = ipamKeys.reservation(record.poolId, record.address);
    this.byKey.delete(key);
    this.byKey.set(key, { text, record });
    if (this.byKey.size > LIMIT) this.byKey.delete(this.byKey.keys().next().value ?? '');
  }

  /** The record this process wrote at `key` as exactly `value`, once; undefined for any other value. */
  take(key: string, value: string): Reservation | undefined {
    const own = this.byKey.get(key);
    if (own?.text !== value) return undefined;
    this.byKey.delete(key);
    return own.record;
  }

  get size(): number {
    return this.byKey.size;
  }
}
