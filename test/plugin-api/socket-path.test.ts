/**
 * Socket paths (plugin socket, CNI socket): whatever stands at the path and is not a socket (a
 * regular file, a symlink, a directory) is refused and left as it was, never deleted to make
 * the socket; a stale socket is still replaced. The daemon given OVSNET_CNI_SOCKET naming a file
 * serves Docker without CNI, says why, and leaves the file.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Fastify from 'fastify';
import t from 'tap';
import { listenOnSocket, removeSocket } from '../../src/plugin-api/listen.js';
import { NO_OVS, Ovsnet, pluginCall } from '../harness/host.js';
import { staleSocket } from '../helpers/stale-socket.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-sockpath-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

t.test('a path that is not a socket is refused and left as it was', async (t) => {
  const file = path.join(dir, 'precious.txt');
  fs.writeFileSync(file, 'keep me');
  const link = path.join(dir, 'link.sock');
  fs.symlinkSync(file, link);
  const sub = path.join(dir, 'adir.sock');
  fs.mkdirSync(sub);
  for (const [where, what] of [
    [file, 'a regular file'],
    [link, 'a symbolic link'],
    [sub, 'a directory'],
  ] as const) {
    const app = Fastify();
    await t.rejects(listenOnSocket(app, where, 'OVSNET_CNI_SOCKET'), {
      code: 'SOCKET_PATH_INVALID',
      message: `${where} is ${what}, not a socket: ovsnet deletes only a stale socket of its own there; move it away, or set OVSNET_CNI_SOCKET to another path`,
    });
    removeSocket(where);
    await app.close();
  }
  t.equal(fs.readFileSync(file, 'utf8'), 'keep me', 'the file is untouched');
  t.equal(fs.readlinkSync(link), file, 'the symlink is untouched');
  t.ok(fs.statSync(sub).isDirectory(), 'the directory is untouched');

  // A stale socket (nobody answers) is still replaced.
  const stale = path.join(dir, 'stale.sock');
  staleSocket(stale);
  t.ok(fs.lstatSync(stale).isSocket(), 'a stale socket is there');
  const app = Fastify();
  await listenOnSocket(app, stale);
  t.ok(fs.lstatSync(stale).isSocket(), 'a stale socket replaced');
  await app.close();
  removeSocket(stale);
  t.notOk(fs.existsSync(stale), 'removeSocket removes a socket');
});

t.test('the daemon with OVSNET_CNI_SOCKET naming a regular file: served without CNI, the file kept', async (t) => {
  const file = path.join(dir, 'not-a-socket.cni');
  fs.writeFileSync(file, 'important');
  const socket = path.join(dir, 'plugins', 'ovsnet.sock');
  const o = await Ovsnet.start(socket, { OVSNET_STORE: `sqlite:${dir}/d/state.db`, OVSNET_OVSDB: NO_OVS, OVSNET_CNI_SOCKET: file });
  const activate = await pluginCall(socket, 'Plugin.Activate', {});
  t.equal(activate.status, 200, 'Docker is served');
  t.equal(await o.kill('SIGTERM'), 0);
  t.match(o.log, /no CNI front end: cannot listen on .*not-a-socket\.cni \(.* is a regular file, not a socket: .*set OVSNET_CNI_SOCKET/);
  t.equal(fs.readFileSync(file, 'utf8'), 'important', 'neither deleted at start nor at stop');
});
