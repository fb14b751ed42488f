import t from 'tap';
import { RecordCache } from '../../../src/driver/records/record-cache.js';

t.test('a record read once is served from the copy; forget and forgetPrefix drop it', async (t) => {
  const c = new RecordCache<string>();
  let loads = 0;
  const load = (v: string | undefined) => async () => {
    loads++;
    return v;
  };
  t.equal(await c.read('/n/a', load('A')), 'A');
  t.equal(await c.read('/n/a', load('changed')), 'A', 'served from the copy');
  t.equal(loads, 1);
  t.equal(await c.read('/n/missing', load(undefined)), undefined);
  t.equal(await c.read('/n/missing', load(undefined)), undefined, 'an absent record is read again each time');
  t.equal(loads, 3);
  c.forget('/n/a');
  t.equal(await c.read('/n/a', load('B')), 'B');
  c.set('/e/n1/x', 'x');
  c.set('/e/n1/y', 'y');
  c.set('/e/n2/z', 'z');
  c.forgetPrefix('/e/n1/');
  t.equal(c.size, 2, 'the prefix is forgotten, the rest kept');
});

t.test('a read that overlapped a change does not keep its (maybe stale) result', async (t) => {
  const c = new RecordCache<string>();
  let finish: (v: string) => void = () => undefined;
  const slow = c.read('/e/x', () => new Promise<string>((r) => (finish = r)));
  c.forget('/e/x'); // e.g. DeleteEndpoint while a Join was reading
  finish('before the delete');
  t.equal(await slow, 'before the delete', 'the reader gets what it read');
  t.equal(await c.read('/e/x', async () => undefined), undefined, 'but it was not kept');
});
