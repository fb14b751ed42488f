/**
 * `ovsnet serve` as a process: its embedded store is readable by root only (files 0600,
 * directory 0700; an older 0644 file is tightened and said).
 */
import { execFileSync } from 'node:child_process';
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

t.test('planted links, hard links and FIFOs are refused; the files they reach are left as they were', async (t) => {
  const { secureStateFiles } = await import('../../src/store/state-files.js');
  const target = path.join(dir, 'root-only.conf');
  for (const suffix of ['', '-wal', '-shm']) {
    for (const plant of ['symlink', 'hardlink', 'fifo'] as const) {
      const d = fs.mkdtempSync(path.join(dir, 'plant-'));
      fs.writeFileSync(target, 'secret\n', { mode: 0o644 });
      fs.chmodSync(target, 0o644);
      const db = path.join(d, 's.db');
      const planted = `${db}${suffix}`;
      if (plant === 'symlink') fs.symlinkSync(target, planted);
      else if (plant === 'hardlink') fs.linkSync(target, planted);
      else execFileSync('mkfifo', [planted]);
      const why = { symlink: 'is a symbolic link', hardlink: 'has 2 hard links', fifo: 'is not a regular file' }[plant];
      t.throws(
        () => secureStateFiles(db),
        {
          code: 'STATE_FILE_UNSAFE',
          message: `the state file ${planted} ${why}`,
        },
        `${plant} as s.db${suffix}: refused`,
      );
      t.equal(mode(target), '0644', `${plant} as s.db${suffix}: the target's mode is unchanged`);
      t.equal(fs.readFileSync(target, 'utf8'), 'secret\n');
      fs.rmSync(target);
    }
  }
});

t.test('a store directory others can write is refused, unless OVSNET_STATE_DIR_SHARED=true', async (t) => {
  const { secureStateFiles } = await import('../../src/store/state-files.js');
  for (const m of [0o777, 0o1777, 0o775]) {
    const d = fs.mkdtempSync(path.join(dir, 'open-'));
    fs.chmodSync(d, m);
    t.throws(() => secureStateFiles(path.join(d, 's.db')), {
      code: 'STATE_FILE_UNSAFE',
      message: new RegExp(
        `the state directory ${d} is writable by other users \\(mode 0${m.toString(8)}\\): .*set OVSNET_STATE_DIR_SHARED=true`,
      ),
    });
    t.same(fs.readdirSync(d), [], `mode 0${m.toString(8)}: refused, nothing made`);
  }
  // The daemon: refused at start with the message, and taken with the setting.
  const shared = fs.mkdtempSync(path.join(dir, 'shared-'));
  fs.chmodSync(shared, 0o1777);
  const env = { OVSNET_STORE: `sqlite:${shared}/s.db`, OVSNET_JOURNAL: 'off', OVSNET_OVSDB: NO_OVS };
  const socket = path.join(dir, 'plugins-open', 'ovsnet.sock');
  // It may stop before or after its socket first answers.
  const refused = await Ovsnet.start(socket, env).then(
    async (o) => ({ status: await o.exited, log: o.log }),
    (err: unknown) => ({ status: -1, log: String(err) }),
  );
  t.not(refused.status, 0, 'the daemon does not run on it');
  t.match(refused.log, /the state directory .*shared-\w+ is writable by other users \(mode 01777\)/);
  t.notOk(fs.existsSync(`${shared}/s.db`), 'no store made there');
  const taken = await Ovsnet.start(socket, { ...env, OVSNET_STATE_DIR_SHARED: 'true' });
  t.teardown(() => taken.kill('SIGTERM'));
  await useStore(socket);
  t.equal(mode(`${shared}/s.db`), '0600', 'with the setting: the store runs, its files private');
  t.equal(fs.statSync(shared).mode & 0o7777, 0o1777, "the shared directory's mode is not ours to change");
});
