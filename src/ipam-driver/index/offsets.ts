/**
 * Sets of reserved address offsets (offset = address - pool base), with a next-fit search.
 * Pure data structures, no I/O.
 * - Bitmap: pools up to 2^32 addresses (every IPv4 pool). Chunks of 4096 bits, made when a bit
 *   in them is first set and dropped when their last one is cleared, each a short sorted list
 *   until it holds more than 128: memory follows use, not pool size (an empty /8 costs nothing,
 *   a flat bitmap 2 MiB; one 1% taken at random well under 1 MiB). The search skips
 *   absent chunks (all free) and full ones, then 32-bit words, so finding a free address is O(1)
 *   amortised with a moving cursor.
 * - Sparse: larger pools (IPv6 /64 and up): a set of the reserved offsets; with a moving cursor
 *   a free offset is found after as many probes as there are reservations in the way.
 */

export interface OffsetSet {
  readonly count: number;
  has(offset: bigint): boolean;
  /** True if it was free. */
  add(offset: bigint): boolean;
  /** True if it was reserved. */
  delete(offset: bigint): boolean;
  /** The first free offset at or after `from` in [lo, hi], wrapping to lo; undefined when full. */
  nextFree(lo: bigint, hi: bigint, from: bigint): bigint | undefined;
}

const BITMAP_LIMIT = 1n << 32n;

export function offsetSetFor(poolSize: bigint): OffsetSet {
  return poolSize <= BITMAP_LIMIT ? new Bitmap(Number(poolSize)) : new Sparse();
}

/** Bits per chunk (a power of two), and 32-bit words per chunk. */
const CHUNK_SHIFT = 12;
const CHUNK_BITS = 1 << CHUNK_SHIFT;
const CHUNK_WORDS = CHUNK_BITS / 32;
/**
 * A chunk holds its offsets as a sorted list while it has at most LIST_MAX, and as a bitmap
 * beyond; back to a list below LIST_MIN (hysteresis: a chunk at the edge does not flip on every
 * change). The list is a string of UTF-16 code units, one per offset (< 4096): 2 bytes each and
 * one small header, where an array costs 8 bytes an element and a typed array ~200 bytes of
 * objects. Scattered reservations (static addresses across a /8) then cost a few bytes each.
 */
const LIST_MAX = 128;
const LIST_MIN = 64;

/** A chunk past LIST_MAX offsets. */
interface Words {
  readonly words: Uint32Array;
  /** Bits set. */
  n: number;
}

type Chunk = Words | string;

const countOf = (chunk: Chunk): number => (typeof chunk === 'string' ? chunk.length : chunk.n);

/** Where `bit` is or would go in the ascending list. */
function sortedIndex(list: string, bit: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list.charCodeAt(mid) < bit) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** A flat string of these code units (concatenation would build a tree of string pieces). */
const listOf = (codes: readonly number[]): string => String.fromCharCode(...codes);

function codesOf(list: string): number[] {
  const codes: number[] = [];
  for (let i = 0; i < list.length; i++) codes.push(list.charCodeAt(i));
  return codes;
}

function chunkHas(chunk: Chunk, bit: number): boolean {
  if (typeof chunk !== 'string') return ((chunk.words[bit >>> 5] ?? 0) & (1 << (bit & 31))) !== 0;
  const at = sortedIndex(chunk, bit);
  return at < chunk.length && chunk.charCodeAt(at) === bit;
}

/** The chunk with `bit` set, or undefined if it was set already. */
function chunkAdd(chunk: Chunk, bit: number): Chunk | undefined {
  if (typeof chunk !== 'string') {
    const w = bit >>> 5;
    const word = chunk.words[w] ?? 0;
    if ((word & (1 << (bit & 31))) !== 0) return undefined;
    chunk.words[w] = word | (1 << (bit & 31));
    chunk.n++;
    return chunk;
  }
  const at = sortedIndex(chunk, bit);
  if (at < chunk.length && chunk.charCodeAt(at) === bit) return undefined;
  const codes = codesOf(chunk);
  codes.splice(at, 0, bit);
  if (codes.length <= LIST_MAX) return listOf(codes);
  const words = new Uint32Array(CHUNK_WORDS);
  for (const b of codes) words[b >>> 5] = (words[b >>> 5] ?? 0) | (1 << (b & 31));
  return { words, n: codes.length };
}

/** The chunk with `bit` clear ('' when none is left), or undefined if it was clear. */
function chunkDelete(chunk: Chunk, bit: number): Chunk | undefined {
  if (typeof chunk !== 'string') {
    const w = bit >>> 5;
    const word = chunk.words[w] ?? 0;
    if ((word & (1 << (bit & 31))) === 0) return undefined;
    chunk.words[w] = word & ~(1 << (bit & 31));
    if (--chunk.n >= LIST_MIN) return chunk;
    const codes: number[] = [];
    for (let i = 0; i < CHUNK_WORDS; i++) {
      for (let v = chunk.words[i] ?? 0; v !== 0; v &= v - 1) codes.push((i << 5) + (31 - Math.clz32(v & -v)));
    }
    return listOf(codes);
  }
  const at = sortedIndex(chunk, bit);
  if (at >= chunk.length || chunk.charCodeAt(at) !== bit) return undefined;
  const codes = codesOf(chunk);
  codes.splice(at, 1);
  return listOf(codes);
}

/** First clear bit of a chunk at or after bit `from`; undefined if none. */
function chunkScan(chunk: Chunk, from: number): number | undefined {
  if (typeof chunk !== 'string') return scanWords(chunk.words, from);
  let free = from;
  for (let i = sortedIndex(chunk, from); i < chunk.length && chunk.charCodeAt(i) === free; i++) free++;
  return free < CHUNK_BITS ? free : undefined;
}

/** First clear bit of a chunk's bitmap at or after bit `from`; undefined if none. */
function scanWords(words: Uint32Array, from: number): number | undefined {
  for (let w = from >>> 5, mask = 0xffffffff << (from & 31); w < CHUNK_WORDS; w++, mask = 0xffffffff) {
    const free = ~(words[w] ?? 0) & mask;
    if (free !== 0) return (w << 5) + (31 - Math.clz32(free & -free));
  }
  return undefined;
}

export class Bitmap implements OffsetSet {
  /**
   * Chunks holding at least one set bit, by chunk number (an array, not a Map: indexing it is
   * what keeps allocation as fast as a flat bitmap). It grows to the highest chunk used: one
   * slot per 4096 addresses of the pool at most (32 KiB for a /8), chunks only where used.
   */
  private readonly chunks: (Chunk | undefined)[] = [];
  private used = 0;
  private n = 0;

  constructor(readonly size: number) {}

  get count(): number {
    return this.n;
  }

  /** Chunks allocated now (memory: 2 bytes per offset up to 128, then about 520 bytes). */
  get chunkCount(): number {
    return this.used;
  }

  has(offset: bigint): boolean {
    const i = Number(offset);
    const chunk = this.chunks[i >>> CHUNK_SHIFT];
    return chunk !== undefined && chunkHas(chunk, i & (CHUNK_BITS - 1));
  }

  add(offset: bigint): boolean {
    const i = Number(offset);
    const c = i >>> CHUNK_SHIFT;
    const chunk = this.chunks[c];
    const next = chunkAdd(chunk ?? '', i & (CHUNK_BITS - 1));
    if (next === undefined) return false;
    if (chunk === undefined) this.used++;
    this.chunks[c] = next;
    this.n++;
    return true;
  }

  delete(offset: bigint): boolean {
    const i = Number(offset);
    const c = i >>> CHUNK_SHIFT;
    const chunk = this.chunks[c];
    const next = chunk === undefined ? undefined : chunkDelete(chunk, i & (CHUNK_BITS - 1));
    if (next === undefined) return false;
    this.n--;
    if (countOf(next) > 0) this.chunks[c] = next;
    else {
      this.chunks[c] = undefined;
      this.used--;
    }
    return true;
  }

  nextFree(lo: bigint, hi: bigint, from: bigint): bigint | undefined {
    const l = Number(lo);
    const h = Number(hi);
    const f = Math.min(Math.max(Number(from), l), h);
    const found = this.scan(f, h) ?? (f > l ? this.scan(l, f - 1) : undefined);
    return found === undefined ? undefined : BigInt(found);
  }

  /** First clear bit in [a, b]. */
  private scan(a: number, b: number): number | undefined {
    let i = a;
    while (i <= b) {
      const c = i >>> CHUNK_SHIFT;
      const base = c * CHUNK_BITS;
      const chunk = this.chunks[c];
      if (chunk === undefined) return i; // no bit set in this chunk
      if (countOf(chunk) === CHUNK_BITS) {
        i = base + CHUNK_BITS;
        continue;
      }
      const at = chunkScan(chunk, i - base);
      if (at !== undefined) return base + at <= b ? base + at : undefined;
      i = base + CHUNK_BITS;
    }
    return undefined;
  }
}

export class Sparse implements OffsetSet {
  private readonly set = new Set<bigint>();

  get count(): number {
    return this.set.size;
  }

  has(offset: bigint): boolean {
    return this.set.has(offset);
  }

  add(offset: bigint): boolean {
    if (this.set.has(offset)) return false;
    this.set.add(offset);
    return true;
  }

  delete(offset: bigint): boolean {
    return this.set.delete(offset);
  }

  nextFree(lo: bigint, hi: bigint, from: bigint): bigint | undefined {
    const span = hi - lo + 1n;
    if (span <= 0n || BigInt(this.set.size) >= span) {
      // Full only if every reservation lies inside [lo, hi]: count those.
      let inside = 0n;
      for (const o of this.set) if (o >= lo && o <= hi) inside++;
      if (inside >= span) return undefined;
    }
    let o = from < lo || from > hi ? lo : from;
    // At most |set| + 1 probes: each reserved offset blocks one step.
    for (let probes = 0; probes <= this.set.size; probes++) {
      if (!this.set.has(o)) return o;
      o = o === hi ? lo : o + 1n;
    }
    return undefined;
  }
}
