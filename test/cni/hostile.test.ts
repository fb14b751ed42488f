/**
 * Hostile or mistaken CNI requests through the plugin binary, against the daemon's CNI server
 * with the real namespace check (netns.ts's openNetns) and the interface side faked: the host's
 * own namespace (by path or a symlink to it), a regular file, a FIFO, names the CNI spec does not
 * allow, CNI_ARGS not KEY=VALUE, a prevResult that is not a result, and a GC without the list
 * of valid attachments are each refused with the spec's code before anything is done: no
 * record, no address, no port, nothing moved. A real namespace is taken.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { openNetns } from '../../src/cni/netns.js';
import { buildCniServer } from '../../src/cni/server.js';
import { createLogger } from '../../src/lib/log.js';
import { cniSetup } from '../helpers/cni.js';
import { plugin } from '../helpers/cni-plugin.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-cni-hostile-'));
const ns = `cnihostile-${randomBytes(3).toString('hex')}`;
execFileSync('ip', ['netns', 'add', ns]);
t.teardown(() => {
  spawnSync('ip', ['netns', 'del', ns]);
  fs.rmSync(dir, { recursive: true, force: true });
});

t.test('refused before anything is done, with the CNI spec code; a real namespace is taken', async (t) => {
  const { service, netns, attached, fx, used } = await cniSetup(t);
  netns.open = async (p) => openNetns(p);
  const socket = path.join(dir, 'd.cni');
  const app = buildCniServer(service, createLogger('silent'));
  await app.listen({ path: socket });
  t.teardown(() => app.close());
  const conf = (extra: Record<string, unknown> = {}) => ({
    cniVersion: '1.1.0',
    name: 'podnet',
    type: 'ovsnet',
    network: 'net1',
    socket,
    ...extra,
  });
  const real = `/run/netns/${ns}`;

  fs.writeFileSync(path.join(dir, 'plain'), 'not a namespace');
  execFileSync('mkfifo', [path.join(dir, 'fifo')]);
  fs.symlinkSync('/proc/1/ns/net', path.join(dir, 'to-pid1'));
  fs.symlinkSync(`/proc/${process.pid}/ns/net`, path.join(dir, 'to-daemon'));
  const portsBefore = fx.ovs.ports.size;

  const cases: [string, Record<string, unknown>, Record<string, string>, number, RegExp][] = [
    [
      'host by path',
      conf(),
      { CNI_NETNS: '/proc/1/ns/net' },
      4,
      /CNI_NETNS "\/proc\/1\/ns\/net" (is PID 1's network namespace|cannot be reached|is the ovsnet daemon's own)/,
    ],
    ['daemon by path', conf(), { CNI_NETNS: `/proc/${process.pid}/ns/net` }, 4, /is the ovsnet daemon's own network namespace/],
    [
      'host by symlink',
      conf(),
      { CNI_NETNS: path.join(dir, 'to-pid1') },
      4,
      /to-pid1" (is PID 1's|cannot be reached|is the ovsnet daemon's own)/,
    ],
    ['daemon by symlink', conf(), { CNI_NETNS: path.join(dir, 'to-daemon') }, 4, /to-daemon" is the ovsnet daemon's own network namespace/],
    ['a regular file', conf(), { CNI_NETNS: path.join(dir, 'plain') }, 4, /plain" is not a namespace \(a plain file\)/],
    ['a FIFO', conf(), { CNI_NETNS: path.join(dir, 'fifo') }, 4, /fifo" is not a namespace file \(a directory, device, FIFO or socket\)/],
    [
      'missing',
      conf(),
      { CNI_NETNS: '/nonexistent/ns' },
      4,
      /CNI_NETNS "\/nonexistent\/ns" does not exist: give the container's network namespace/,
    ],
    ['not absolute', conf(), { CNI_NETNS: 'run/netns/x' }, 4, /CNI_NETNS "run\/netns\/x" is not an absolute path/],
    [
      'escapes in the ID',
      conf(),
      { CNI_NETNS: real, CNI_CONTAINERID: 'abc\u001b[2J\u001b]0;owned\u0007' },
      4,
      /CNI_CONTAINERID "abc\\u001b\[2J.*is not a container ID: a letter or digit, then/,
    ],
    ['a "/" in the ID', conf(), { CNI_NETNS: real, CNI_CONTAINERID: 'a/../b' }, 4, /CNI_CONTAINERID "a\/\.\.\/b" is not a container ID/],
    ['an ID starting with "-"', conf(), { CNI_NETNS: real, CNI_CONTAINERID: '-x' }, 4, /is not a container ID/],
    [
      'ifname ..',
      conf(),
      { CNI_NETNS: real, CNI_IFNAME: '..' },
      4,
      /CNI_IFNAME "\.\." is not an interface name: "\." and "\.\." are refused/,
    ],
    ['ifname .', conf(), { CNI_NETNS: real, CNI_IFNAME: '.' }, 4, /CNI_IFNAME "\." is not an interface name/],
    ['ifname with ":"', conf(), { CNI_NETNS: real, CNI_IFNAME: 'eth0:1' }, 4, /CNI_IFNAME "eth0:1" is not an interface name/],
    [
      'CNI_ARGS not K=V',
      conf(),
      { CNI_NETNS: real, CNI_ARGS: 'IgnoreUnknown=1;garbage' },
      4,
      /CNI_ARGS ".*" has "garbage", not one KEY=VALUE: expected KEY=VALUE pairs/,
    ],
    ['CNI_ARGS K==V', conf(), { CNI_NETNS: real, CNI_ARGS: 'A=b=c' }, 4, /has "A=b=c", not one KEY=VALUE/],
    ['prevResult not a result', conf({ prevResult: 'x' }), { CNI_NETNS: real }, 7, /has "prevResult" .*: expected a CNI result object/],
    [
      'GC without the list',
      conf(),
      { CNI_NETNS: '', CNI_CONTAINERID: '', CNI_IFNAME: '' },
      7,
      /has no "cni\.dev\/valid-attachments": GC needs the list/,
    ],
    [
      'GC listing a bad ID',
      conf({ 'cni.dev/valid-attachments': [{ containerID: 'x/y', ifname: 'eth0' }] }),
      {},
      7,
      /has a valid attachment .* whose name is not a container ID/,
    ],
  ];
  for (const [what, config, env, code, msg] of cases) {
    const command = what.startsWith('GC') ? 'GC' : 'ADD';
    const r = await plugin(command, config, env);
    t.equal(r.json.code, code, `${what}: code ${code} (${String(r.json.msg)})`);
    t.match(String(r.json.msg), msg, what);
    t.ok(r.ms < 5000, `${what}: answered in ${r.ms.toFixed(0)} ms (a FIFO never blocks)`);
  }
  t.equal(used(), 0, 'no address reserved');
  t.same(await service.attachments.list(), [], 'no attachment recorded');
  t.equal(fx.ovs.ports.size, portsBefore, 'no OVS port made');
  t.equal(attached.length, 0, 'nothing moved into any namespace');

  // The same requests made right are taken: a real namespace, a spec-valid ID, CNI_ARGS a runtime sends.
  const env = { CNI_NETNS: real, CNI_CONTAINERID: 'c0ffee_1.a-b', CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAME=web;' };
  const add = await plugin('ADD', conf({ prevResult: { cniVersion: '1.1.0' } }), env);
  t.equal(add.status, 0, add.out);
  t.equal(attached[0]?.via?.startsWith(`/proc/${process.pid}/fd/`), true, 'the interface goes in by the descriptor');
  t.equal(used(), 1);
  const noList = await plugin('GC', conf(), { CNI_CONTAINERID: '', CNI_NETNS: '', CNI_IFNAME: '' });
  t.equal(noList.json.code, 7, 'a GC without the list is refused');
  t.equal(used(), 1, 'and the live attachment stays');
  const emptyList = await plugin('GC', conf({ 'cni.dev/valid-attachments': [] }), {});
  t.equal(emptyList.status, 0, emptyList.out);
  t.equal(used(), 0, 'a GC listing none collects it');
});
