/**
 * `ovsnet serve` as a process: its embedded store is readable by root only (files 0600,
 * directory 0700; an older 0644 file is tightened and said).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { NO_OVS, Ovsnet, pluginCall } from '../harness/host.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-priv-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

const mode = (f: string) => (fs.statSync(f).mode & 0o777).toString(8).padStart(4, '0');

const POOL = { AddressSpace: '', Pool: '10.9.0.0/24', SubPool: '', Options: {}, V6: false };

/** A pool requested and released: the store has written (its -wal and -shm exist). */
async function useStore(socket: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const pool = await pluginCall(socket, 'IpamDriver.RequestPool', POOL);
    if (pool.status === 200) {
      await pluginCall(socket, 'IpamDriver.ReleasePool', { PoolID: (pool.body as { PoolID: string }).PoolID });
      return;
    }
    if (Date.now() > deadline) throw new Error(`RequestPool: ${JSON.stringify(pool.body)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

t.test('the embedded store: files 0600 in a 0700 directory; an older 0644 file tightened, with a log line', async (t) => {
  const stateDir = path.join(dir, 'state');
  const db = path.join(stateDir, 'state.db');
  const env = { OVSNET_STORE: `sqlite:${db}`, OVSNET_JOURNAL: path.join(stateDir, 'unconfirmed.json'), OVSNET_OVSDB: NO_OVS };
  const socket = path.join(dir, 'plugins', 'ovsnet.sock');
  let o = await Ovsnet.start(socket, env);
  await useStore(socket);
  t.same(
    [stateDir, db, `${db}-wal`, `${db}-shm`].map(mode),
    ['0700', '0600', '0600', '0600'],
    'a new directory 0700; the database, -wal and -shm 0600',
  );
  t.equal(await o.kill('SIGTERM'), 0);

  // As an older ovsnet (or a umask of 022) left them.
  fs.chmodSync(stateDir, 0o755);
  for (const f of [db, `${db}-wal`, `${db}-shm`]) if (fs.existsSync(f)) fs.chmodSync(f, 0o644);
  o = await Ovsnet.start(socket, env);
  t.teardown(() => o.kill('SIGTERM'));
  await useStore(socket);
  t.equal(mode(stateDir), '0700', 'a directory holding only the store is tightened');
  t.equal(mode(db), '0600', 'the database is tightened');
  t.match(o.log, new RegExp(`"level":"warn".*${db.replace(/[/.]/g, '\\$&')} was readable by other users \\(mode 0644\\): set to 0600`));
  t.match(o.log, /the state directory .*state was open to other users: set to 0700/);
});

t.test('a directory shared with other files keeps its mode, and the log says how to fix it', async (t) => {
  const shared = path.join(dir, 'shared');
  fs.mkdirSync(shared, { mode: 0o755 });
  fs.chmodSync(shared, 0o755);
  fs.writeFileSync(path.join(shared, 'someone-elses.txt'), '');
  const socket = path.join(dir, 'plugins-shared', 'ovsnet.sock');
  const o = await Ovsnet.start(socket, { OVSNET_STORE: `sqlite:${shared}/ovsnet.db`, OVSNET_JOURNAL: 'off', OVSNET_OVSDB: NO_OVS });
  t.teardown(() => o.kill('SIGTERM'));
  await useStore(socket);
  t.equal(mode(shared), '0755', 'not ours to change');
  t.equal(mode(path.join(shared, 'ovsnet.db')), '0600', 'the database itself is private all the same');
  t.match(
    o.log,
    /the state directory .*shared is open to other users and holds other files \(someone-elses\.txt\), so ovsnet leaves its mode: chmod 700/,
  );
});
