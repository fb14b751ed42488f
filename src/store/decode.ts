/**
 * The one way a value read from the store becomes a record. Values are JSON written by some
 * ovsnet (this one, an older one, or a peer sharing etcd) or by anyone with access to the
 * store; a value that does not parse, or fails its family's shape check (shapes.ts, chosen by
 * the key), is a coded error naming its key, never a bare SyntaxError from deep inside a caller.
 *
 * Whoever follows many records (a snapshot and watch: the IPAM index, the host registry, the
 * logical networks) skips a bad one rather than fail on it (decodeOrSkip): one hand-written key
 * in a shared etcd must not stop every host. Skipped records are noted in `skippedRecords`:
 * logged once per key and value, counted by family for the metrics.
 */
import { OvsnetError, isOvsnetError, messageOf } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import { familyOf, shapeOf, type ShapeCheck } from './shapes.js';

export type { ShapeCheck } from './shapes.js';

/** At most this much of a bad value is quoted back (a record may be large or hostile). */
const QUOTE_LIMIT = 80;

/**
 * Parses `value` (the store's value at `key`) as a JSON object and checks its shape: the
 * family's (by key) and `check`'s when given. Throws STORE_RECORD_INVALID when it is not one;
 * the message names the key and how to fix it.
 */
export function decodeRecord<T>(key: string, value: string, check?: ShapeCheck): T {
  const parsed = parseRecord(key, value, check);
  if (typeof parsed === 'string') throw invalidRecord(key, parsed);
  return parsed as T;
}

/** What is wrong with the record at `key` (as decodeRecord would say); undefined when nothing. */
export function recordProblem(key: string, value: string, check?: ShapeCheck): string | undefined {
  const parsed = parseRecord(key, value, check);
  return typeof parsed === 'string' ? parsed : undefined;
}

/** The parsed record, or what is wrong with it. */
function parseRecord(key: string, value: string, check: ShapeCheck | undefined): Record<string, unknown> | string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return `not JSON: ${quote(value)}`;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return `not a JSON object: ${quote(value)}`;
  const record = parsed as Record<string, unknown>;
  return shapeOf(key)?.(record) ?? check?.(record) ?? record;
}

/** STORE_RECORD_INVALID for the record at `key`; `problem` says what is wrong with it. */
export function invalidRecord(key: string, problem: string): OvsnetError {
  return new OvsnetError(
    'STORE_RECORD_INVALID',
    `store record ${quote(key)} is malformed (${problem}): ovsnet writes every record as a JSON object; delete or rewrite the key`,
  );
}

function quote(text: string): string {
  return JSON.stringify(text.length > QUOTE_LIMIT ? `${text.slice(0, QUOTE_LIMIT)}...` : text);
}

/** Keys remembered as bad at most (a flood of bad keys must not grow memory without end). */
const REMEMBERED_LIMIT = 1000;

/**
 * The records this process skipped as malformed: each logged once (per key and value, so a
 * rewrite that is still bad is logged again), counted by family. One per process: the readers
 * that skip records are built deep inside IPAM and the driver, the count is read by the metrics.
 */
export class SkippedRecords {
  /** Key -> the value that was bad, in order of first sight (oldest dropped beyond the limit). */
  private readonly bad = new Map<string, string>();
  /** Records skipped, by family, since the start. */
  readonly byFamily = new Map<string, number>();
  /** Where the first sight of each bad record is logged; set by the daemon. */
  log: Logger | undefined;

  /** Notes that the record at `key` (holding `value`) was skipped because of `err`. */
  skip(key: string, value: string, err: unknown): void {
    if (this.bad.get(key) === value) return;
    this.bad.delete(key);
    this.bad.set(key, value);
    if (this.bad.size > REMEMBERED_LIMIT) this.bad.delete(this.bad.keys().next().value as string);
    const family = familyOf(key);
    this.byFamily.set(family, (this.byFamily.get(family) ?? 0) + 1);
    this.log?.error(
      { key, family, err },
      `skipped the store record ${quote(key)}: ${messageOf(err)}. The rest of the store is used without it; ovsnet doctor lists such keys`,
    );
  }

  /** The key now holds a good record, or none. */
  cleared(key: string): void {
    this.bad.delete(key);
  }

  /** Keys skipped and still bad as far as this process knows. */
  keys(): string[] {
    return [...this.bad.keys()];
  }
}

export const skippedRecords = new SkippedRecords();

/**
 * decodeRecord for a reader that goes on without a bad record: undefined (and the record noted
 * in skippedRecords) when it is malformed. Other errors are not caught.
 */
export function decodeOrSkip<T>(key: string, value: string, check?: ShapeCheck): T | undefined {
  try {
    const record = decodeRecord<T>(key, value, check);
    skippedRecords.cleared(key);
    return record;
  } catch (err) {
    if (!isOvsnetError(err, 'STORE_RECORD_INVALID')) throw err;
    skippedRecords.skip(key, value, err);
    return undefined;
  }
}

/**
 * The records of a listing that decode, in order: a malformed one is skipped and noted (as
 * decodeOrSkip does). For readers of many records of a family (overlap checks, sweeps), which
 * one hand-written key must not stop.
 */
export function decodeAll<T>(
  kvs: readonly { readonly key: string; readonly value: string }[],
  decode: (kv: { key: string; value: string }) => T,
): T[] {
  const out: T[] = [];
  for (const kv of kvs) {
    try {
      out.push(decode(kv));
      skippedRecords.cleared(kv.key);
    } catch (err) {
      if (!isOvsnetError(err, 'STORE_RECORD_INVALID')) throw err;
      skippedRecords.skip(kv.key, kv.value, err);
    }
  }
  return out;
}
