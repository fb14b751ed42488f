/**
 * Sets of reserved address offsets (offset = address - pool base), with a next-fit search.
 * Pure data structures, no I/O.
 *
 * - Bitmap: pools up to 2^32 addresses (every IPv4 pool). Chunks of 4096 bits, made when a bit
 *   in them is first set and dropped when their last one is cleared: memory follows use, not
 *   pool size (an empty /8 costs nothing, where a flat bitmap took 2 MiB). The search skips
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

interface Chunk {
  readonly words: Uint32Array;
  /** Bits set. */
  n: number;
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

  /** Chunks allocated now (memory: about 520 bytes each). */
  get chunkCount(): number {
    return this.used;
  }

  has(offset: bigint): boolean {
    const i = Number(offset);
    const chunk = this.chunks[i >>> CHUNK_SHIFT];
    return chunk !== undefined && ((chunk.words[(i & (CHUNK_BITS - 1)) >>> 5] ?? 0) & (1 << (i & 31))) !== 0;
  }

  add(offset: bigint): boolean {
    const i = Number(offset);
    const c = i >>> CHUNK_SHIFT;
    let chunk = this.chunks[c];
    if (chunk === undefined) {
      chunk = { words: new Uint32Array(CHUNK_WORDS), n: 0 };
      this.chunks[c] = chunk;
      this.used++;
    }
    const w = (i & (CHUNK_BITS - 1)) >>> 5;
    const bit = 1 << (i & 31);
    const word = chunk.words[w] ?? 0;
    if ((word & bit) !== 0) return false;
    chunk.words[w] = word | bit;
    chunk.n++;
    this.n++;
    return true;
  }

  delete(offset: bigint): boolean {
    const i = Number(offset);
    const c = i >>> CHUNK_SHIFT;
    const chunk = this.chunks[c];
    if (chunk === undefined) return false;
    const w = (i & (CHUNK_BITS - 1)) >>> 5;
    const bit = 1 << (i & 31);
    const word = chunk.words[w] ?? 0;
    if ((word & bit) === 0) return false;
    chunk.words[w] = word & ~bit;
    this.n--;
    if (--chunk.n === 0) {
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
      if (chunk.n === CHUNK_BITS) {
        i = base + CHUNK_BITS;
        continue;
      }
      const at = scanChunk(chunk.words, i - base);
      if (at !== undefined) return base + at <= b ? base + at : undefined;
      i = base + CHUNK_BITS;
    }
    return undefined;
  }
}

/** First clear bit of a chunk at or after bit `from`; undefined if none. */
function scanChunk(words: Uint32Array, from: number): number | undefined {
  for (let w = from >>> 5, mask = 0xffffffff << (from & 31); w < CHUNK_WORDS; w++, mask = 0xffffffff) {
    const free = ~(words[w] ?? 0) & mask;
    if (free !== 0) return (w << 5) + (31 - Math.clz32(free & -free));
  }
  return undefined;
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
