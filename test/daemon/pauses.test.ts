/** daemon/pauses.ts: safety-net work runs in a pause of Docker's calls, and never later than its bound. */
import t from 'tap';
import { MAX_DEFER_MS, Pauses, QUIET_MS } from '../../src/daemon/pauses.js';

function clocked(): { pauses: Pauses; at: (ms: number) => void } {
  let now = 0;
  return { pauses: new Pauses(() => now), at: (ms) => (now = ms) };
}

t.test('no call yet: due at once', async (t) => {
  const { pauses } = clocked();
  t.ok(pauses.due(0));
});

t.test('a call: not due until Docker has been quiet for QUIET_MS', async (t) => {
  const { pauses, at } = clocked();
  at(10_000);
  pauses.called();
  at(10_000 + QUIET_MS - 1);
  t.notOk(pauses.due(9_000), 'a call 1 ms short of the pause');
  at(10_000 + QUIET_MS);
  t.ok(pauses.due(9_000), 'quiet long enough');
});

t.test('calls without a pause: due once the last run is MAX_DEFER_MS old, and only then', async (t) => {
  const { pauses, at } = clocked();
  const lastDone = 5_000;
  const ran: number[] = [];
  // A call every 500 ms, a look every 10 s (the flow check's period), for three minutes.
  let done = lastDone;
  for (let ms = lastDone; ms <= lastDone + 180_000; ms += 500) {
    at(ms);
    pauses.called();
    if (ms % 10_000 === 0 && pauses.due(done)) {
      ran.push(ms - done);
      done = ms;
    }
  }
  t.ok(ran.length >= 2, `ran ${ran.length} times in three minutes of calls`);
  t.ok(
    ran.every((gap) => gap >= MAX_DEFER_MS && gap < MAX_DEFER_MS + 10_000),
    `each run a minute after the last, within one period: ${ran.join(', ')} ms`,
  );
});

t.test('a pause after a storm: the check runs at the first look in it', async (t) => {
  const { pauses, at } = clocked();
  at(30_000);
  pauses.called();
  at(40_000);
  t.ok(pauses.due(29_000), 'the first look 10 s after the last call');
});
