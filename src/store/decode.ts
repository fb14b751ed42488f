/**
 * The one way a value read from the store becomes a record. Values are JSON written by some
 * ovsnet (this one, an older one, or a peer sharing etcd) or by anyone with access to the
 * store; a value that does not parse, or fails the family's shape check, is a coded error
 * naming its key, never a bare SyntaxError from deep inside a caller.
 */
import { OvsnetError } from '../errors.js';

/** Says what is wrong with a parsed value, or undefined when it is acceptable. */
export type ShapeCheck = (value: Record<string, unknown>) => string | undefined;

/** At most this much of a bad value is quoted back (a record may be large or hostile). */
const QUOTE_LIMIT = 80;

/**
 * Parses `value` (the store's value at `key`) as a JSON object and checks its shape.
 * Throws STORE_RECORD_INVALID when it is not one; the message names the key and how to fix it.
 */
export function decodeRecord<T>(key: string, value: string, check?: ShapeCheck): T {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw invalid(key, `not JSON: ${quote(value)}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw invalid(key, `not a JSON object: ${quote(value)}`);
  }
  const problem = check?.(parsed as Record<string, unknown>);
  if (problem !== undefined) throw invalid(key, problem);
  return parsed as T;
}

function invalid(key: string, problem: string): OvsnetError {
  return new OvsnetError(
    'STORE_RECORD_INVALID',
    `store record ${quote(key)} is malformed (${problem}): ovsnet writes every record as a JSON object; delete or rewrite the key`,
  );
}

function quote(text: string): string {
  return JSON.stringify(text.length > QUOTE_LIMIT ? `${text.slice(0, QUOTE_LIMIT)}...` : text);
}
