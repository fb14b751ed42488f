/**
 * The timers: the retry helper's delays grow to the cap, jittered so that two hosts do not
 * retry in lockstep, and its loop retries until success and ends at once on abort; a repeated
 * pass starts after the last ends; a round-trip bound lets an answer already due win.
 */
import t from 'tap';
import { backoffDelays, expireAfterIo, keepTrying, Repeater } from '../../src/lib/timers.js';

// The helper's timers never hold the process open (a daemon exits on its own): this one does,
// for the tests that wait on them.
const alive = setInterval(() => undefined, 1000);
t.teardown(() => clearInterval(alive));

const take = (next: () => number, n: number) => Array.from({ length: n }, next);
const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);

t.test('the delays grow: about 1 s first, then doubling (medians), capped at 30 s', async (t) => {
  const firsts = take(() => backoffDelays()(), 2001).sort((a, b) => a - b);
  const median = firsts[1000] ?? 0;
  t.ok(median > 800 && median < 1100, `median first delay ${median} ms`);
  t.ok((firsts.at(-1) ?? 0) < 1400, 'no first delay much over 1 s');
  for (let i = 0; i < 100; i++) {
    const d = take(backoffDelays(1000, Number.MAX_SAFE_INTEGER), 8);
    // Decorrelated jitter: each wait is random, their running sum grows as 2^n.
    if (sum(d.slice(0, 2)) > 2900) t.fail(`the first two waits add up to ${sum(d.slice(0, 2))} ms`);
    if (sum(d.slice(4)) <= 4 * sum(d.slice(0, 4)))
      t.fail(`waits 5-8 (${sum(d.slice(4))} ms) not well over waits 1-4 (${sum(d.slice(0, 4))} ms)`);
  }
  const capped = take(backoffDelays(), 30);
  t.ok(
    capped.every((d) => d <= 30_000),
    'none over 30 s',
  );
  t.equal(capped.at(-1), 30_000, 'and they reach it');
});

t.test('two hosts retrying from the same moment do not retry in lockstep', async (t) => {
  const a = take(backoffDelays(), 6);
  const b = take(backoffDelays(), 6);
  t.notSame(a, b);
  // A hundred hosts that lost etcd together: their first retries spread over most of a second.
  const firsts = take(() => backoffDelays()(), 100);
  t.ok(
    Math.max(...firsts) - Math.min(...firsts) > 500,
    `first retries spread over ${Math.round(Math.max(...firsts) - Math.min(...firsts))} ms`,
  );
});

t.test('retries until it works, saying each failure with the wait after it', async (t) => {
  let calls = 0;
  const failures: number[] = [];
  const done = await keepTrying(
    async () => {
      if (++calls <= 3) throw new Error(`no ${calls}`);
    },
    { signal: new AbortController().signal, initialDelayMs: 5, maxDelayMs: 50, onFailure: (_err, ms) => failures.push(ms) },
  );
  t.equal(done, true);
  t.equal(calls, 4, 'three failures, then success');
  t.equal(failures.length, 3);
  t.ok(failures.every((ms) => ms >= 0 && ms <= 50));
});

t.test('an abort ends a pending wait at once, and nothing is tried after it', async (t) => {
  const stop = new AbortController();
  let calls = 0;
  const t0 = Date.now();
  const run = keepTrying(
    () => {
      calls++;
      return Promise.reject(new Error('refused'));
    },
    { signal: stop.signal, initialDelayMs: 10_000, onFailure: () => setTimeout(() => stop.abort(), 20) },
  );
  t.equal(await run, false, 'aborted, not done');
  t.equal(calls, 1);
  t.ok(Date.now() - t0 < 1000, `ended ${Date.now() - t0} ms after the start, not after the wait`);
  await new Promise((r) => setTimeout(r, 50));
  t.equal(calls, 1, 'no attempt after the abort');

  const later = new AbortController();
  let first = false;
  const waiting = keepTrying(
    () => {
      first = true;
      return Promise.resolve();
    },
    { signal: later.signal, delayFirst: true, initialDelayMs: 10_000, onFailure: () => undefined },
  );
  later.abort();
  t.equal(await waiting, false);
  t.notOk(first, 'delayFirst: aborted during the first wait, never tried');
});

t.test('a failure that comes after the abort is not reported', async (t) => {
  const stop = new AbortController();
  let reported = 0;
  const done = await keepTrying(
    () => {
      stop.abort();
      return Promise.reject(new Error('closing'));
    },
    { signal: stop.signal, onFailure: () => reported++ },
  );
  t.equal(done, false);
  t.equal(reported, 0);
});

t.test('a Repeater runs its pass at the interval, the next after the last ended, and goes on after a failure', async (t) => {
  const r = new Repeater();
  const errors: unknown[] = [];
  let passes = 0;
  let inPass = false;
  r.start(
    5,
    async () => {
      t.notOk(inPass, 'never two passes at once');
      inPass = true;
      passes++;
      await new Promise((res) => setTimeout(res, 10));
      inPass = false;
      if (passes === 1) throw new Error('first fails');
    },
    (err) => errors.push(err),
  );
  await new Promise((res) => setTimeout(res, 100));
  r.stop();
  t.ok(passes >= 3, `${passes} passes`);
  t.equal(errors.length, 1, 'the failure reported');
  // Stopped, maybe during a pass (each takes 10 ms of every 15): that one ends, no other starts.
  const at = passes;
  await new Promise((res) => setTimeout(res, 60));
  t.equal(passes, at, 'no pass starts after stop()');
});

t.test('a bound expires after its time, after the I/O of that turn', async (t) => {
  const started = Date.now();
  await new Promise<void>((res) => expireAfterIo(20, res));
  t.ok(Date.now() - started >= 19);
});
