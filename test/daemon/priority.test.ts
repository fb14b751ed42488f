/**
 * OVSNET_NICE (src/daemon/priority.ts): every thread and, when ovsnet leads its session, its
 * autogroup given the value; refused without CAP_SYS_NICE with one warning and nothing changed.
 * The unit cases use a fake kernel; the daemon's are read back from the kernel's /proc.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { applyPriority, groupNiceOf, sessionOf, type SchedulerOs } from '../../src/daemon/priority.js';
import { MAIN, NO_OVS, Ovsnet, pluginCall } from '../harness/host.js';

const errno = (code: string) => Object.assign(new Error(`${code}: a test's`), { code });

/** A kernel of threads with nice values, one autogroup, and a CAP_SYS_NICE that may be missing. */
function fakeKernel(
  o: { threads?: number[]; leader?: boolean; group?: number | undefined; capable?: boolean; endsOnCall?: number; refusedOn?: number } = {},
) {
  const nice = new Map((o.threads ?? [1, 2, 3]).map((tid) => [tid, 0]));
  const state = { group: 'group' in o ? o.group : 0, calls: 0 };
  const sched: SchedulerOs = {
    threads: () => [...nice.keys()],
    niceOf: (tid) => nice.get(tid === 0 ? 1 : tid) ?? 0,
    setNice: (tid, n) => {
      state.calls++;
      if (tid === o.endsOnCall) throw errno('ESRCH');
      if (tid === o.refusedOn) throw errno('EPERM');
      if (o.capable === false && n < (nice.get(tid) ?? 0)) throw errno('EACCES');
      nice.set(tid, n);
    },
    leadsSession: () => o.leader ?? true,
    groupNice: () => state.group,
    setGroupNice: (n) => {
      if (o.capable === false && n < (state.group ?? 0)) throw errno('EPERM');
      state.group = n;
    },
  };
  return { sched, nice, state };
}

t.test('every thread and the autogroup of a session ovsnet leads get the value', async (t) => {
  const k = fakeKernel();
  t.same(applyPriority(-10, k.sched), { nice: -10, threadsSet: 3, group: 'set' });
  t.same([...k.nice.values()], [-10, -10, -10]);
  t.equal(k.state.group, -10);
  const again = applyPriority(-10, k.sched);
  t.same(again, { nice: -10, threadsSet: 0, group: 'had it' }, 'a second time changes nothing');
});

t.test("a session shared with others (a terminal's) keeps its autogroup; a kernel without autogroups has none", async (t) => {
  const shared = fakeKernel({ leader: false });
  t.match(applyPriority(-5, shared.sched), { threadsSet: 3, group: 'shared session: left' });
  t.equal(shared.state.group, 0, 'the autogroup untouched');
  const none = fakeKernel({ group: undefined });
  t.match(applyPriority(-5, none.sched), { threadsSet: 3, group: 'no autogroups' });
});

t.test('inherit changes nothing; a thread that ended meanwhile is skipped', async (t) => {
  const k = fakeKernel();
  t.same(applyPriority('inherit', k.sched), { nice: 'inherit', threadsSet: 0, group: 'inherit' });
  t.equal(k.state.calls, 0);
  const ending = fakeKernel({ endsOnCall: 2 });
  t.match(applyPriority(-10, ending.sched), { threadsSet: 2, group: 'set' });
});

t.test('without CAP_SYS_NICE: refused with the fix named, nothing lowered; raising the value needs no capability', async (t) => {
  const k = fakeKernel({ capable: false });
  const r = applyPriority(-10, k.sched);
  t.match(r, { threadsSet: 0, group: 'not tried' });
  t.match(
    r.refused,
    /cannot set ovsnet's scheduling priority to nice -10 \(OVSNET_NICE\): EACCES.*started with \(0\).*CAP_SYS_NICE.*OVSNET_NICE=inherit/,
  );
  t.same([...k.nice.values()], [0, 0, 0]);
  t.equal(k.state.group, 0);
  const partway = fakeKernel({ refusedOn: 3 });
  t.match(applyPriority(-10, partway.sched), { threadsSet: 0, group: 'not tried', refused: /EPERM/ }, 'refused at the third thread');
  t.same([...partway.nice.values()], [0, 0, 0], 'the two threads changed before it put back');
  t.equal(partway.state.group, 0);
  const up = fakeKernel({ capable: false });
  t.match(applyPriority(5, up.sched), { threadsSet: 3, group: 'set', refused: undefined }, "a higher value is anyone's to take");
});

t.test("the session and the autogroup's value, read from the kernel's lines; malformed ones are no value", async (t) => {
  t.equal(sessionOf('4242 (node) S 1 4242 4242 0 -1 4194560 1 0'), 4242);
  t.equal(sessionOf('4243 (a) b) (c) S 1 7 4200 0 -1'), 4200, "a command holding ') (' and spaces");
  t.equal(sessionOf('4244 (x y z) R 10 11 12 0'), 12);
  t.ok(Number.isNaN(sessionOf('garbage')));
  t.ok(Number.isNaN(sessionOf('1 (node) S 1 2')), 'too few fields');
  t.ok(Number.isNaN(sessionOf('1 (node) S 1 2 x3')));
  t.equal(groupNiceOf('/autogroup-16244 nice 0\n'), 0);
  t.equal(groupNiceOf('/autogroup-1 nice -10\n'), -10);
  for (const bad of [
    '',
    '/autogroup-1 nice\n',
    '/autogroup-1 nice -100\n',
    '/autogroup-x nice 0',
    `/autogroup-1 nice 0 ${'9'.repeat(10_000)}`,
  ]) {
    t.equal(groupNiceOf(bad), undefined, JSON.stringify(bad.slice(0, 40)));
  }
});

/** Each thread's nice value (field 19 of its stat line), and the autogroup's, of process `pid`. */
function niceOfProcess(pid: number): { threads: number[]; group: number | undefined } {
  const threads = fs.readdirSync(`/proc/${pid}/task`).map((tid) => {
    const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
  });
  const group = fs.existsSync(`/proc/${pid}/autogroup`) ? groupNiceOf(fs.readFileSync(`/proc/${pid}/autogroup`, 'utf8')) : undefined;
  return { threads, group };
}

const root = process.getuid?.() === 0;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-priority-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

const daemonEnv = (name: string, env: Record<string, string> = {}) => ({
  OVSNET_STORE: `sqlite:${path.join(dir, `${name}.db`)}`,
  OVSNET_OVSDB: NO_OVS,
  OVSNET_LOG_LEVEL: 'debug',
  OVSNET_CNI_SOCKET: 'off',
  ...env,
});

t.test(
  "OVSNET_NICE=-10: the daemon's threads, those it makes later, and its own session at -10",
  { skip: !root && 'needs root' },
  async (t) => {
    const socket = path.join(dir, 'a', 'ovsnet.sock');
    const o = await Ovsnet.start(socket, daemonEnv('a', { OVSNET_NICE: '-10' }));
    t.teardown(() => o.kill('SIGTERM'));
    const pid = o.child.pid ?? 0;
    const first = niceOfProcess(pid);
    // Threads made after the start (libuv's pool, the link worker when a call needs it) inherit the main thread's value.
    for (let i = 0; i < 20; i++)
      t.equal(
        (await pluginCall(socket, 'IpamDriver.RequestPool', { AddressSpace: 'LocalDefault', Pool: '', Options: {}, V6: false })).status,
        200,
      );
    await new Promise((r) => setTimeout(r, 1000));
    const later = niceOfProcess(pid);
    t.ok(first.threads.length >= 5, `${first.threads.length} threads at start, ${later.threads.length} later`);
    t.same(new Set([...first.threads, ...later.threads]), new Set([-10]), 'every thread at -10, then and later');
    if (later.group !== undefined) t.equal(later.group, -10, 'its autogroup at -10 (it leads its session)');
    t.match(o.log, /"autogroup":"(set|no autogroups)".*scheduling priority: nice -10/);
  },
);

t.test('OVSNET_NICE=inherit, the default: left as started', { skip: !root && 'needs root' }, async (t) => {
  const socket = path.join(dir, 'b', 'ovsnet.sock');
  const o = await Ovsnet.start(socket, daemonEnv('b'));
  t.teardown(() => o.kill('SIGTERM'));
  const { threads, group } = niceOfProcess(o.child.pid ?? 0);
  const mine = os.getPriority();
  t.same(new Set(threads), new Set([mine]), `every thread at the test's own ${mine}`);
  if (group !== undefined) t.equal(group, 0, "its new session's autogroup as the kernel made it");
  t.notMatch(o.log, /"level":"warn".*OVSNET_NICE/, 'nothing to say');
});

t.test('without CAP_SYS_NICE: one warning naming the fix, nothing changed, Docker served', { skip: !root && 'needs root' }, async (t) => {
  const socket = path.join(dir, 'c', 'ovsnet.sock');
  const o = await Ovsnet.start(socket, daemonEnv('c', { OVSNET_NICE: '-10' }), ['setpriv', '--bounding-set', '-sys_nice', '--']);
  t.teardown(() => o.kill('SIGTERM'));
  const { threads, group } = niceOfProcess(o.child.pid ?? 0);
  t.same(new Set(threads), new Set([os.getPriority()]), 'no thread changed');
  if (group !== undefined) t.equal(group, 0, 'its autogroup unchanged');
  const warnings = o.log.split('\n').filter((l) => l.includes('"level":"warn"') && l.includes('OVSNET_NICE'));
  t.equal(warnings.length, 1, 'said once');
  t.match(warnings[0], /cannot set ovsnet's scheduling priority to nice -10 \(OVSNET_NICE\).*CAP_SYS_NICE/);
  t.equal((await pluginCall(socket, 'NetworkDriver.GetCapabilities')).status, 200, 'serving Docker');
});

t.test('a malformed, out of range, injected or huge OVSNET_NICE stops the start: exit 2, nothing made', async (t) => {
  for (const bad of ['-21', '20', 'abc', '-10.5', '0x10', '-10; touch /tmp/x', '9'.repeat(100_000), 'inherit-10', '−10']) {
    const socket = path.join(dir, 'bad', 'ovsnet.sock');
    const res = spawnSync(process.execPath, [MAIN, 'serve'], {
      env: { PATH: process.env.PATH ?? '', OVSNET_SOCKET: socket, ...daemonEnv('bad'), OVSNET_NICE: bad, OVSNET_LOG_LEVEL: 'warn' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    const label = JSON.stringify(bad.slice(0, 20));
    t.equal(res.status, 2, `${label}: exit 2`);
    t.match(res.stderr, /OVSNET_NICE=.* is not valid: expected an integer from -20 to 19, or inherit/, `${label}: says what is valid`);
    t.notOk(fs.existsSync(socket), `${label}: no socket`);
    t.notOk(fs.existsSync(path.join(dir, 'bad.db')), `${label}: no store`);
  }
});
