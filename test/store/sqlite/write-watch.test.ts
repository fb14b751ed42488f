/**
 * Other processes' writes heard as they happen (src/store/sqlite/write-watch.ts): the store file
 * and its WAL are heard, coalesced per turn of the event loop; other files of the directory are
 * not; a watch that cannot be made or fails later leaves the store to its poll.
 */
import { execFileSync } from 'node:child_process';
import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { watchWrites } from '../../../src/store/sqlite/write-watch.js';

const settle = () => new Promise((r) => setTimeout(r, 100));

t.test('a write to the file or its WAL is heard, many in one turn once; other files of the directory are not', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-writes-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'state.db');
  let heard = 0;
  const w = watchWrites(
    file,
    () => heard++,
    () => t.fail('not lost'),
  );
  t.ok(w, 'the directory is watched');
  t.teardown(() => w?.close());
  await settle();

  fs.writeFileSync(`${file}-wal`, 'frame');
  await settle();
  t.equal(heard, 1, 'a write to the WAL');
  fs.appendFileSync(file, 'page');
  await settle();
  t.equal(heard, 2, 'a checkpoint into the file');

  for (let i = 0; i < 50; i++) fs.appendFileSync(`${file}-wal`, String(i));
  await settle();
  t.ok(heard >= 3 && heard <= 3 + 50, `50 writes in one turn: heard ${heard - 2} times, coalesced`);

  const before = heard;
  // Names that only look like the store's, a FIFO and a link among them: nothing heard.
  for (let i = 0; i < 200; i++) fs.writeFileSync(path.join(dir, `other-${i}`), 'x');
  fs.writeFileSync(path.join(dir, 'state.db-shm'), 'x');
  fs.writeFileSync(path.join(dir, 'state.db-wal.bak'), 'x');
  fs.writeFileSync(path.join(dir, 'xstate.db'), 'x');
  fs.symlinkSync('/etc/hostname', path.join(dir, 'state.db-journal'));
  execFileSync('mkfifo', [path.join(dir, 'fifo')]);
  await settle();
  t.equal(heard, before, 'no other file is heard');

  w?.close();
  fs.appendFileSync(`${file}-wal`, 'after');
  await settle();
  t.equal(heard, before, 'nothing after close');
});

t.test('a directory that cannot be watched: undefined, the store polls', async (t) => {
  const failing = (() => {
    throw Object.assign(new Error('ENOSPC: System limit for number of file watchers reached'), { code: 'ENOSPC' });
  }) as unknown as typeof fs.watch;
  t.equal(
    watchWrites(
      '/nowhere/state.db',
      () => t.fail('no write'),
      () => t.fail('not lost'),
      failing,
    ),
    undefined,
  );
  t.equal(
    watchWrites(
      path.join(os.tmpdir(), `ovsnet-missing-${process.pid}`, 'state.db'),
      () => undefined,
      () => undefined,
    ),
    undefined,
    'a directory that does not exist',
  );
});

t.test('a watch failing later is lost once: nothing more is heard, onLost tells the store to poll', async (t) => {
  const fake = Object.assign(new EventEmitter(), { close: () => undefined }) as unknown as fs.FSWatcher;
  let listener: ((event: string, name: string | null) => void) | undefined;
  const watch = ((_dir: string, _o: unknown, l: (event: string, name: string | null) => void) => {
    listener = l;
    return fake;
  }) as unknown as typeof fs.watch;
  let heard = 0;
  let lost = 0;
  const w = watchWrites(
    '/var/lib/ovsnet/state.db',
    () => heard++,
    () => lost++,
    watch,
  );
  t.ok(w);
  listener?.('change', null);
  await settle();
  t.equal(heard, 1, 'an event without a name may be the store: heard');
  fake.emit('error', new Error('EMFILE'));
  fake.emit('error', new Error('EMFILE'));
  listener?.('change', 'state.db-wal');
  await settle();
  t.same([heard, lost], [1, 1]);
});
