/** The one lock: arrival order, keys independent, released when a caller throws, idle keys dropped. */
import t from 'tap';
import { KeyedLock, Mutex } from '../../src/lib/locks.js';

const tick = (ms = 1) => new Promise((r) => setTimeout(r, ms));

t.test('a Mutex runs callers one at a time, in arrival order', async (t) => {
  const m = new Mutex();
  const seen: string[] = [];
  let running = 0;
  const job = (name: string, ms: number) =>
    m.run(async () => {
      running++;
      t.equal(running, 1, `${name} alone`);
      seen.push(`${name}+`);
      await tick(ms);
      seen.push(`${name}-`);
      running--;
      return name;
    });
  t.same(await Promise.all([job('a', 5), job('b', 1), job('c', 0)]), ['a', 'b', 'c']);
  t.same(seen, ['a+', 'a-', 'b+', 'b-', 'c+', 'c-']);
});

t.test('a caller that throws releases the lock, and its error reaches only it', async (t) => {
  const m = new Mutex();
  const failed = m.run(() => Promise.reject(new Error('boom')));
  const next = m.run(async () => 'after');
  await t.rejects(failed, /boom/);
  t.equal(await next, 'after');
  const k = new KeyedLock();
  await t.rejects(
    k.run('x', () => Promise.reject(new Error('boom'))),
    /boom/,
  );
  t.equal(await k.run('x', async () => 'again'), 'again');
});

t.test('a KeyedLock orders callers of a key, and other keys do not wait', async (t) => {
  const k = new KeyedLock();
  const seen: string[] = [];
  let release = () => undefined as void;
  const held = k.run('a', () => new Promise<void>((r) => (release = r)).then(() => void seen.push('a1')));
  const second = k.run('a', async () => void seen.push('a2'));
  await k.run('b', async () => void seen.push('b'));
  t.same(seen, ['b'], 'b ran while a was held');
  release();
  await Promise.all([held, second]);
  t.same(seen, ['b', 'a1', 'a2']);
});

t.test('idle keys are dropped', async (t) => {
  const k = new KeyedLock();
  await Promise.all(Array.from({ length: 100 }, (_, i) => k.run(`c${i % 10}`, () => tick())));
  await Promise.all([k.run('x', () => Promise.reject(new Error('no'))).catch(() => undefined)]);
  await tick();
  t.equal(k.size, 0, 'no entry left');
});
