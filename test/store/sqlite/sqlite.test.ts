import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import { storeContract } from '../contract.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-sqlite-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

storeContract(t, () => new SqliteStore({ file: path.join(dir, 'state.db'), sweepMs: 100 }));

t.test('two handles on one file see each other, watches included', async (t) => {
  const a = new SqliteStore({ file: path.join(dir, 'shared.db') });
  const b = new SqliteStore({ file: path.join(dir, 'shared.db') });
  t.teardown(async () => {
    await a.close();
    await b.close();
  });
  const seen: string[] = [];
  const w = await b.watch('/x/', (await b.revision()) + 1, { onEvents: (evs) => evs.forEach((e) => seen.push(e.kv.value)) });
  await a.txn({ compares: [], success: [{ type: 'put', key: '/x/1', value: 'from-a' }] });
  t.equal((await b.get('/x/1'))?.value, 'from-a');
  const until = Date.now() + 2000;
  while (seen.length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
  t.same(seen, ['from-a'], "b's watch sees a's write");
  await w.close();
});

t.test("another handle's write is heard as it happens, not at the poll or sweep (60 s here)", async (t) => {
  const file = path.join(dir, 'heard.db');
  const a = new SqliteStore({ file, pollMs: 60_000, sweepMs: 60_000 });
  const b = new SqliteStore({ file, pollMs: 60_000, sweepMs: 60_000 });
  t.teardown(async () => {
    await a.close();
    await b.close();
  });
  const seen: string[] = [];
  const w = await b.watch('/h/', (await b.revision()) + 1, { onEvents: (evs) => evs.forEach((e) => seen.push(e.kv.value)) });
  for (let i = 0; i < 3; i++) {
    await a.txn({ compares: [], success: [{ type: 'put', key: `/h/${i}`, value: `v${i}` }] });
    // A correctness bound, far under the poll: heard by inotify, not found by polling.
    const until = Date.now() + 5000;
    while (seen.length <= i && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
  }
  t.same(seen, ['v0', 'v1', 'v2']);
  await w.close();
});

t.test('a watch from compacted history fails clearly', async (t) => {
  const s = new SqliteStore({ file: path.join(dir, 'compact.db'), historyRevisions: 5, sweepMs: 20 });
  t.teardown(() => s.close());
  for (let i = 0; i < 20; i++) await s.txn({ compares: [], success: [{ type: 'put', key: '/c', value: String(i) }] });
  await new Promise((r) => setTimeout(r, 100));
  await t.rejects(s.watch('/', 2, { onEvents: () => undefined }), { code: 'STORE_COMPACTED', message: /read again/ });
});

t.test('an unwritable location fails with the path and the valid form', async (t) => {
  const file = path.join(dir, 'a-file');
  fs.writeFileSync(file, '');
  t.throws(() => new SqliteStore({ file: path.join(file, 'state.db') }), {
    code: 'STORE_UNAVAILABLE',
    message: /a-file\/state\.db.*OVSNET_STORE=sqlite:/,
  });
});
