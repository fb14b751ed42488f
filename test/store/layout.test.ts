/**
 * The store's layout version (src/store/layout.ts): written at start on a
 * store without one (a 0.1.0 store or a new one), kept on a store of this layout, and a store of
 * a newer layout refused, by checkLayout and by `ovsnet serve`, which exits with the reason.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { LAYOUT_KEY, LAYOUT_VERSION, checkLayout } from '../../src/store/layout.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import { VERSION } from '../../src/lib/version.js';
import { NO_OVS, Ovsnet, pluginCall } from '../harness/host.js';
import { waitFor } from '../helpers/wait.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-layout-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

async function withStore<T>(file: string, fn: (s: SqliteStore) => Promise<T>): Promise<T> {
  const s = new SqliteStore({ file: path.join(dir, file) });
  try {
    return await fn(s);
  } finally {
    await s.close();
  }
}
/** Records each upgrade asked for. */
const upgrades: number[] = [];
const upgrade = (from: number) => Promise.resolve(void upgrades.push(from));
const put = (file: string, value: string) =>
  withStore(file, (s) => s.txn({ compares: [], success: [{ type: 'put', key: LAYOUT_KEY, value }] }));

t.test('a store without a layout key gets this one; a store of this layout keeps it', async (t) => {
  await withStore('fresh.db', async (s) => {
    await s.txn({ compares: [], success: [{ type: 'put', key: '/ovsnet/v1/networks/n1', value: '{}' }] }); // as 0.1.0 left it
    t.equal(await checkLayout(s, upgrade), undefined, 'none before');
    const written = await s.get(LAYOUT_KEY);
    t.same(JSON.parse(written?.value ?? ''), { layout: LAYOUT_VERSION, writtenBy: VERSION });
    t.equal(await checkLayout(s, upgrade), LAYOUT_VERSION, 'found at the next start');
    t.equal((await s.get(LAYOUT_KEY))?.version, 1, 'and not written again');
    t.ok(await s.get('/ovsnet/v1/networks/n1'), 'the state left as it was');
    t.same(upgrades.splice(0), [1], 'upgraded once, from layout 1');
  });
});

t.test('a store of layout 1 is upgraded before the key says this layout', async (t) => {
  await put('old.db', JSON.stringify({ layout: 1, writtenBy: '0.9.0' }));
  await withStore('old.db', async (s) => {
    let keyDuring: string | undefined;
    const watching = async (from: number) => {
      keyDuring = (await s.get(LAYOUT_KEY))?.value;
      upgrades.push(from);
    };
    t.equal(await checkLayout(s, watching), 1, 'layout 1 before');
    t.match(JSON.parse(keyDuring ?? ''), { layout: 1 }, 'the key still said 1 while the upgrade ran');
    t.same(JSON.parse((await s.get(LAYOUT_KEY))?.value ?? ''), { layout: LAYOUT_VERSION, writtenBy: VERSION });
    t.same(upgrades.splice(0), [1]);
    t.equal(await checkLayout(s, upgrade), LAYOUT_VERSION);
    t.same(upgrades, [], 'not upgraded again');
  });
});

t.test('a store of a newer layout is refused, saying which and what to do; a malformed record too', async (t) => {
  await put('newer.db', JSON.stringify({ layout: LAYOUT_VERSION + 1, writtenBy: '9.0.0' }));
  await withStore('newer.db', async (s) => {
    await t.rejects(checkLayout(s, upgrade), {
      code: 'STORE_LAYOUT_NEWER',
      message: `the store holds state of layout ${LAYOUT_VERSION + 1} (written by ovsnet 9.0.0); ovsnet ${VERSION} reads layout ${LAYOUT_VERSION} only: run ovsnet 9.0.0 or later on this store (a downgrade across a layout change is not supported), or point OVSNET_STORE at another store`,
    });
    t.match(JSON.parse((await s.get(LAYOUT_KEY))?.value ?? ''), { layout: LAYOUT_VERSION + 1 }, 'left as it was');
  });
  await put('bad.db', 'v2');
  await withStore('bad.db', (s) =>
    t.rejects(checkLayout(s, upgrade), {
      code: 'STORE_RECORD_INVALID',
      message: /^the store's layout record \/ovsnet\/layout is "v2": expected/,
    }),
  );
});

t.test('ovsnet serve on a store of a newer layout exits 1 with the reason; on its own layout it serves', async (t) => {
  const serve = (file: string) =>
    Ovsnet.start(path.join(dir, `${file}.sock`), {
      OVSNET_STORE: `sqlite:${path.join(dir, file)}`,
      OVSNET_OVSDB: NO_OVS,
      OVSNET_LOG_LEVEL: 'warn',
      OVSNET_METRICS_ADDR: '',
    });
  // It may answer Plugin.Activate before the store is loaded: the refusal follows at once.
  const refused = await serve('newer.db').catch((err: unknown) => err);
  let log: string;
  if (refused instanceof Ovsnet) {
    t.equal(await refused.exited, 1, 'exit status 1');
    log = refused.log;
  } else {
    log = (refused as Error).message; // it exited before answering: the harness quotes its output
  }
  t.match(
    log,
    new RegExp(`^ovsnet: the store holds state of layout ${LAYOUT_VERSION + 1} \\(written by ovsnet 9\\.0\\.0\\)`, 'm'),
    'the reason',
  );
  // A Plugin.Activate answered before the exit may log its reconcile refused by the layout check
  // (STORE_LAYOUT_NEWER): that is the check working. Any other reconcile line is one that ran.
  const others = log.split('\n').filter((l) => !l.includes('"code":"STORE_LAYOUT_NEWER"'));
  t.notMatch(others.join('\n'), /reconcil/, 'no reconciling with OVS on that store, not even after Plugin.Activate');
  const o = await serve('ours.db');
  t.teardown(() => (o.child.exitCode === null ? o.kill('SIGKILL') : undefined));
  await waitFor(async () => (await withStore('ours.db', (s) => s.get(LAYOUT_KEY))) !== undefined, 5000, 'the layout key written');
  t.equal((await pluginCall(o.socket, 'IpamDriver.GetCapabilities')).status, 200, 'and it serves');
  t.equal(await o.kill('SIGTERM'), 0);
});
