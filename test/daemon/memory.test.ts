/** After start-up the daemon runs one full collection when V8's collector is exposed, and says when it is not. */
import t from 'tap';
import { exposedCollector, heapBound, HeapWatch, settleAfterStart } from '../../src/daemon/memory.js';

const logger = () => {
  const lines: string[] = [];
  return { lines, log: { debug: (...args: unknown[]) => void lines.push(String(args[args.length - 1])) } as never };
};

t.test('the collector is found only when --expose-gc put one on the global object', async (t) => {
  t.equal(exposedCollector({}), undefined);
  t.equal(exposedCollector({ gc: 'not a function' }), undefined);
  let calls = 0;
  const collect = exposedCollector({ gc: () => calls++ });
  t.type(collect, 'function');
  collect?.();
  t.equal(calls, 1);
});

t.test('settleAfterStart collects once and logs the heap before and after; without a collector it says why', async (t) => {
  const { lines, log } = logger();
  let used = 90 * 2 ** 20;
  let calls = 0;
  t.equal(
    settleAfterStart(
      () => ((used = 17 * 2 ** 20), calls++),
      log,
      () => used,
    ),
    true,
  );
  t.equal(calls, 1);
  t.match(lines[0], /collected what start-up read/);
  const none = logger();
  t.equal(settleAfterStart(undefined, none.log), false);
  t.match(none.lines[0], /started without --expose-gc/);
});

t.test('between bursts: a collection only when the heap is over twice what the last one left, plus 16 MiB', async (t) => {
  const MiB = 2 ** 20;
  t.equal(heapBound(20 * MiB), 56 * MiB, 'the bound grows with what is live (the records kept)');
  t.equal(heapBound(100 * MiB), 216 * MiB);
  let used = 20 * MiB;
  let collections = 0;
  const watch = new HeapWatch(
    () => {
      collections++;
      used = 22 * MiB; // what is live after it
    },
    () => used,
  );
  t.equal(watch.check(), false, 'at what was live: none');
  used = 55 * MiB;
  t.equal(watch.check(), false, 'under the bound: none');
  used = 160 * MiB; // a burst of endpoints made
  t.equal(watch.check(), true, 'over it: one');
  t.equal(collections, 1);
  used = 59 * MiB;
  t.equal(watch.check(), false, 'the next bound is from what that collection left (22 MiB: 60)');
  used = 61 * MiB;
  t.equal(watch.check(), true);
  const none = new HeapWatch(undefined, () => 1e12);
  t.equal(none.check(), false, 'nothing without a collector');
  none.start(1);
  none.stop();
  watch.start(1);
  t.teardown(() => watch.stop());
});
