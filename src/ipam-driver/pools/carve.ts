/**
 * Choosing a pool for a network created without --subnet: the next subnet of the configured
 * ranges that overlaps no existing pool and no host route. Pure: the caller supplies what is
 * taken. The search resumes after the last pool handed out (a cursor), so a pool just released
 * is not handed out again until every other candidate has been.
 */
import type { DefaultPool } from '../../config/config.js';
import { overlaps, subnetAt, subnetCount, type Family, type Prefix } from '../../lib/cidr.js';

export interface Candidate {
  readonly prefix: Prefix;
  /** Cursor value to store: where the next search starts. */
  readonly next: bigint;
}

/** Subnets are numbered across the ranges of a family in order; the cursor is that number. */
export function nextPool(
  ranges: readonly DefaultPool[],
  family: Family,
  cursor: bigint,
  taken: readonly Prefix[],
  maxProbes = 1_000_000,
): Candidate | undefined {
  const mine = ranges.filter((r) => r.range.family === family);
  const counts = mine.map((r) => subnetCount(r.range, r.bits));
  const total = counts.reduce((a, b) => a + b, 0n);
  if (total === 0n) return undefined;
  let n = ((cursor % total) + total) % total;
  const probes = total < BigInt(maxProbes) ? total : BigInt(maxProbes);
  for (let i = 0n; i < probes; i++) {
    const candidate = at(mine, counts, n);
    if (!taken.some((t) => overlaps(t, candidate))) return { prefix: candidate, next: (n + 1n) % total };
    n = (n + 1n) % total;
  }
  return undefined;
}

function at(ranges: readonly DefaultPool[], counts: readonly bigint[], n: bigint): Prefix {
  let rest = n;
  for (let i = 0; i < ranges.length; i++) {
    const c = counts[i] ?? 0n;
    const r = ranges[i];
    if (r !== undefined && rest < c) return subnetAt(r.range, r.bits, rest);
    rest -= c;
  }
  throw new Error('subnet index out of range');
}
