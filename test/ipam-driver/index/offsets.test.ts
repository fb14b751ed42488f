import t from 'tap';
import { Bitmap, Sparse, offsetSetFor, type OffsetSet } from '../../../src/ipam-driver/index/offsets.js';

function reference(set: OffsetSet, lo: number, hi: number, from: number, taken: Set<number>): void {
  const got = set.nextFree(BigInt(lo), BigInt(hi), BigInt(from));
  let expect: number | undefined;
  const start = Math.min(Math.max(from, lo), hi);
  for (let i = 0; i <= hi - lo; i++) {
    const o = lo + ((start - lo + i) % (hi - lo + 1));
    if (!taken.has(o)) {
      expect = o;
      break;
    }
  }
  if (got !== (expect === undefined ? undefined : BigInt(expect))) {
    throw new Error(`nextFree(${lo}, ${hi}, ${from}) = ${got}, expected ${expect}`);
  }
}

for (const [name, make] of [
  ['bitmap', () => new Bitmap(300)],
  ['sparse', () => new Sparse()],
] as const) {
  t.test(`${name}: add, delete, count`, async (t) => {
    const s = make();
    t.ok(s.add(5n));
    t.notOk(s.add(5n), 'adding twice reports it was taken');
    t.equal(s.count, 1);
    t.ok(s.has(5n));
    t.ok(s.delete(5n));
    t.notOk(s.delete(5n), 'deleting twice reports it was free');
    t.equal(s.count, 0);
  });

  t.test(`${name}: nextFree matches a reference scan under random fills`, async (t) => {
    let seed = 42;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    for (let round = 0; round < 300; round++) {
      const s = make();
      const taken = new Set<number>();
      const fill = rand(100);
      for (let i = 0; i < 300; i++) {
        if (rand(100) < fill) {
          s.add(BigInt(i));
          taken.add(i);
        }
      }
      const lo = rand(150);
      const hi = lo + rand(299 - lo);
      reference(s, lo, hi, lo + rand(hi - lo + 1), taken);
      reference(s, lo, hi, 0, taken);
    }
    t.pass('300 random fills agree');
  });

  t.test(`${name}: full range answers undefined`, async (t) => {
    const s = make();
    for (let i = 10; i <= 20; i++) s.add(BigInt(i));
    t.equal(s.nextFree(10n, 20n, 15n), undefined);
    t.equal(s.nextFree(10n, 21n, 15n), 21n);
    t.equal(s.nextFree(9n, 20n, 15n), 9n, 'wraps to the bottom');
  });
}

t.test('bitmap word boundaries', async (t) => {
  const s = new Bitmap(128);
  for (let i = 0; i < 64; i++) s.add(BigInt(i));
  t.equal(s.nextFree(0n, 127n, 0n), 64n);
  s.add(64n);
  t.equal(s.nextFree(0n, 127n, 31n), 65n);
  t.equal(s.nextFree(0n, 63n, 31n), undefined);
  t.equal(s.nextFree(100n, 127n, 127n), 127n);
});

t.test('bitmap across chunks (4096 bits): nextFree matches a reference scan; emptied chunks go', async (t) => {
  const size = 3 * 4096 + 100;
  let seed = 7;
  const rand = (n: number) => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  for (let round = 0; round < 60; round++) {
    const s = new Bitmap(size);
    const taken = new Set<number>();
    // Runs of reservations, some spanning a chunk boundary, some filling a whole chunk.
    for (let run = 0; run < 6; run++) {
      const start = rand(size);
      const length = rand(round % 3 === 0 ? 5000 : 300);
      for (let i = start; i < Math.min(size, start + length); i++) {
        s.add(BigInt(i));
        taken.add(i);
      }
    }
    const lo = rand(size / 2);
    const hi = lo + rand(size - lo);
    reference(s, lo, hi, lo + rand(hi - lo + 1), taken);
    reference(s, lo, hi, 4095, taken);
    reference(s, 0, size - 1, 0, taken);
  }
  const s = new Bitmap(size);
  for (let i = 4090; i < 4100; i++) s.add(BigInt(i));
  t.equal(s.chunkCount, 2, 'two chunks for bits on both sides of a boundary');
  for (let i = 4090; i < 4100; i++) s.delete(BigInt(i));
  t.equal(s.chunkCount, 0, 'none once they are cleared');
  t.equal(s.count, 0);
});

t.test('a /8 costs memory for what it holds, not for its 2^24 addresses', async (t) => {
  // Heap and array buffers both: chunks are strings on the heap until they fill, then typed arrays.
  const used = () => process.memoryUsage().heapUsed + process.memoryUsage().arrayBuffers;
  const before = used();
  const sets = Array.from({ length: 50 }, () => offsetSetFor(1n << 24n));
  for (const s of sets) for (let i = 0; i < 100; i++) s.add(BigInt(i * 1000));
  const grown = used() - before;
  t.ok(grown < 16 * 1024 * 1024, `50 /8 pools with 100 addresses each: ${Math.round(grown / 1024)} KiB (a flat bitmap: 100 MiB)`);
  // 100 offsets 1000 apart fall in 25 chunks of 4096: only those exist.
  t.equal((sets[0] as Bitmap | undefined)?.chunkCount, 25, 'chunks only where addresses are');
  t.equal(sets[0]?.nextFree(0n, (1n << 24n) - 1n, 0n), 1n);
  t.equal(sets[0]?.count, 100);
});

t.test('bitmap chunks switch between a list and a bitmap as they fill and empty, answering the same', async (t) => {
  // Seeded pseudo-random adds and deletes in two chunks, growing past 128 (list -> bitmap) and
  // shrinking below 64 (bitmap -> list) five times each; every answer checked against a Set.
  const s = new Bitmap(8192);
  const model = new Set<number>();
  const wrong: string[] = [];
  let seed = 7;
  const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
  for (let step = 0; step < 20_000; step++) {
    const growing = Math.floor(step / 2000) % 2 === 0;
    const o = rand(8192);
    if (growing ? rand(4) !== 0 : rand(4) === 0) {
      if (s.add(BigInt(o)) === model.has(o)) wrong.push(`add ${o}`);
      model.add(o);
    } else {
      if (s.delete(BigInt(o)) !== model.has(o)) wrong.push(`delete ${o}`);
      model.delete(o);
    }
    if (step % 97 === 0) reference(s, 0, 8191, rand(8192), model);
  }
  for (let o = 0; o < 8192; o++) if (s.has(BigInt(o)) !== model.has(o)) wrong.push(`has ${o}`);
  t.same(wrong, [], 'every add, delete and has as the Set answers');
  t.equal(s.count, model.size);
  for (const o of [...model]) s.delete(BigInt(o));
  t.equal(s.chunkCount, 0, 'no chunk once every offset is gone');
});
