/**
 * PoolIDs: what RequestPool answers and Docker hands back on every later IPAM call. Made from
 * the address space and the canonical pool (and range), so the same request gets the same ID.
 */
import { CidrError, formatPrefix, parseCidr, type Prefix } from '../../lib/cidr.js';

export const ADDRESS_SPACES = { local: 'LocalDefault', global: 'GlobalDefault' } as const;

export function poolIdOf(space: string, pool: Prefix, sub: Prefix | undefined): string {
  return `${space}/${formatPrefix(pool)}${sub === undefined ? '' : `/${formatPrefix(sub)}`}`;
}

/** Whether `text` has the form poolIdOf() makes (an address space, a canonical pool, maybe a range). */
export function isPoolId(text: string): boolean {
  const m = /^([A-Za-z]+)\/([0-9a-f.:]+\/\d{1,3})(?:\/([0-9a-f.:]+\/\d{1,3}))?$/.exec(text);
  if (m === null || (m[1] !== ADDRESS_SPACES.local && m[1] !== ADDRESS_SPACES.global)) return false;
  try {
    const pool = parseCidr(m[2] ?? '');
    const sub = m[3] === undefined ? undefined : parseCidr(m[3]);
    return poolIdOf(m[1], pool, sub) === text;
  } catch (err) {
    if (err instanceof CidrError) return false;
    throw err;
  }
}
