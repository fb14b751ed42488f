/**
 * Sets of reserved address offsets (offset = address - pool base), with a next-fit search.
 * Pure data structures, no I/O.
 *
 * - Bitmap: pools up to 2^24 addresses (every IPv4 pool up to a /8). A 32-bit word scan skips
 *   full words, so finding a free address is O(1) amortised with a moving cursor.
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

const BITMAP_LIMIT = 1n << 24n;

export function offsetSetFor(poolSize: bigint): OffsetSet {
  return poolSize <= BITMAP_LIMIT ? new Bitmap(Number(poolSize)) : new Sparse();
}

export class Bitmap implements OffsetSet {
  private readonly words: Uint32Array;
  private n = 0;

  constructor(readonly size: number) {
    this.words = new Uint32Array(Math.ceil(size / 32));
  }

  get count(): number {
    return this.n;
  }

  has(offset: bigint): boolean {
    const i = Number(offset);
    return ((this.words[i >>> 5] ?? 0) & (1 << (i & 31))) !== 0;
  }

  add(offset: bigint): boolean {
    const i = Number(offset);
    const w = i >>> 5;
    const bit = 1 << (i & 31);
    const word = this.words[w] ?? 0;
    if ((word & bit) !== 0) return false;
    this.words[w] = word | bit;
    this.n++;
    return true;
  }

  delete(offset: bigint): boolean {
    const i = Number(offset);
    const w = i >>> 5;
    const bit = 1 << (i & 31);
    const word = this.words[w] ?? 0;
    if ((word & bit) === 0) return false;
    this.words[w] = word & ~bit;
    this.n--;
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
      const w = i >>> 5;
      const word = this.words[w] ?? 0;
      if (word === 0xffffffff) {
        i = (w + 1) << 5;
        continue;
      }
      // Bits below i in this word count as taken.
      const free = ~word & (0xffffffff << (i & 31));
      if (free === 0) {
        i = (w + 1) << 5;
        continue;
      }
      const bit = 31 - Math.clz32(free & -free);
      const at = (w << 5) + bit;
      return at <= b ? at : undefined;
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
