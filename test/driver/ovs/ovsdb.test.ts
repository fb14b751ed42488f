/**
 * The OVSDB client against a real ovsdb-server (no ovs-vswitchd: this test makes no bridge in
 * the machine's namespace), and the JSON-RPC framing against a scripted peer.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { JsonRpcClient, JsonSplitter } from '../../../src/driver/ovs/jsonrpc.js';
import { Ovsdb } from '../../../src/driver/ovs/ovsdb.js';
import { Vswitchd } from '../../../src/driver/ovs/vswitchd.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-ovsdb-'));
const db = path.join(dir, 'conf.db');
const sock = path.join(dir, 'db.sock');
spawnSync('ovsdb-tool', ['create', db, '/usr/share/openvswitch/vswitch.ovsschema']);
let server: ChildProcess | undefined;
async function startServer(): Promise<void> {
  server = spawn('ovsdb-server', [db, `--remote=punix:${sock}`, '--no-chdir', `--unixctl=${dir}/ctl`], { stdio: 'ignore' });
  for (let i = 0; i < 100 && !fs.existsSync(sock); i++) await new Promise((r) => setTimeout(r, 20));
}
/** A running ovsdb-server and a client of it, both stopped when the test ends. */
async function serverAndClient(t: { teardown: (f: () => Promise<void>) => void }, timeoutMs: number): Promise<Ovsdb> {
  await startServer();
  const ovs = new Ovsdb(`unix:${sock}`, timeoutMs);
  t.teardown(async () => {
    ovs.close();
    await stopServer();
  });
  return ovs;
}
const init = () => spawnSync('ovs-vsctl', [`--db=unix:${sock}`, '--no-wait', 'init']);
async function stopServer(): Promise<void> {
  const s = server;
  server = undefined;
  if (s !== undefined && s.exitCode === null && s.signalCode === null) {
    s.kill('SIGTERM');
    await new Promise((r) => s.once('exit', r));
  }
  fs.rmSync(sock, { force: true });
}
t.teardown(async () => {
  await stopServer();
  fs.rmSync(dir, { recursive: true, force: true });
});

t.test('JSON values split from a stream, whatever the chunking', async (t) => {
  const text = '{"id":1,"result":[{"a":"}{\\"["}]}[1,[2]]{"method":"echo","params":[],"id":"x"}';
  for (const size of [1, 3, 7, text.length]) {
    const s = new JsonSplitter();
    const out: unknown[] = [];
    for (let i = 0; i < text.length; i += size) out.push(...s.push(text.slice(i, i + size)));
    t.same(out, [{ id: 1, result: [{ a: '}{"[' }] }, [1, [2]], { method: 'echo', params: [], id: 'x' }], `chunks of ${size}`);
  }
});

t.test('answers the server echo, times out a silent server', async (t) => {
  const path2 = path.join(dir, 'fake.sock');
  const echoes: unknown[] = [];
  const srv = net.createServer((c) => {
    const split = new JsonSplitter();
    c.setEncoding('utf8');
    c.write(JSON.stringify({ id: 'e1', method: 'echo', params: ['ping'] }));
    c.on('data', (d: string) => echoes.push(...split.push(d)));
  });
  await new Promise<void>((r) => srv.listen(path2, r));
  t.teardown(() => srv.close());
  const rpc = new JsonRpcClient({ target: `unix:${path2}`, timeoutMs: 300 });
  const started = Date.now();
  await t.rejects(rpc.request('list_dbs', []), { code: 'OVS_UNAVAILABLE', message: /did not answer list_dbs within 300 ms/ });
  t.ok(Date.now() - started < 1000);
  t.match(
    echoes.find((e) => (e as { id?: unknown }).id === 'e1'),
    { id: 'e1', result: ['ping'], error: null },
    'echo answered with its params',
  );
  rpc.close();
});

t.test('an answer that arrived while the event loop was busy past the bound is taken, not timed out', async (t) => {
  await startServer();
  const rpc = new JsonRpcClient({ target: `unix:${sock}`, timeoutMs: 300 });
  t.teardown(async () => {
    rpc.close();
    await stopServer();
  });
  await rpc.request('list_dbs', []); // connected
  for (let i = 0; i < 3; i++) {
    const pending = rpc.request('list_dbs', []);
    // Busy in the check phase, as after an I/O callback: the next turn runs timers, then I/O.
    await new Promise<void>((r) =>
      setImmediate(() => {
        const until = Date.now() + 500;
        while (Date.now() < until); // the answer arrives meanwhile, the timer expires
        r();
      }),
    );
    t.same(await pending, ['Open_vSwitch', '_Server'], `attempt ${i}: the answer is taken`);
  }
});

t.test('a real ovsdb-server: ports with external_ids, idempotent delete, clear errors', async (t) => {
  const ovs = await serverAndClient(t, 500);
  t.notOk(await ovs.bridgeExists('br0'));
  await t.rejects(ovs.ensureBridge('br0', 'netdev', 'standalone'), {
    code: 'OVS_UNAVAILABLE',
    message: /not initialized .*ovs-vsctl --no-wait init/,
  });
  init();
  await t.rejects(ovs.ensureBridge('br0', 'netdev', 'standalone'), {
    code: 'OVS_UNAVAILABLE',
    message: /ovs-vswitchd did not apply configuration \d+ within 500 ms: is ovs-vswitchd running\?/,
  });
  t.ok(await ovs.bridgeExists('br0'), 'the bridge row was written before the wait');
  await ovs.ensureBridge('br0', 'netdev', 'standalone').catch(() => undefined);
  await ovs.addPort('br0', 'p1', { tag: 7, externalIds: { 'ovsnet-endpoint': 'e1' } });
  await t.rejects(ovs.addPort('br0', 'p1', { tag: 7, externalIds: {} }), { code: 'OVS_FAILED', message: /constraint violation/ });
  await t.rejects(ovs.addPort('nobr', 'p2', { tag: 7, externalIds: {} }), { code: 'OVS_FAILED' });
  await t.rejects(
    ovs.addPort('nobr', 'p1', { tag: 7, externalIds: {}, replace: true }),
    { code: 'OVS_FAILED' },
    'replace adds to a bridge that exists only',
  );
  await ovs.addPort('br0', 'p1', { tag: 8, externalIds: { 'ovsnet-endpoint': 'e1' }, replace: true });
  await ovs.addPort('br0', 'p3', { tag: 9, externalIds: { 'ovsnet-endpoint': 'e3' }, replace: true });
  const own = await ovs.ownPorts();
  t.same(
    own.map((p) => [p.name, p.tag, p.externalIds['ovsnet-endpoint']]),
    [
      ['p1', 8, 'e1'],
      ['p3', 9, 'e3'],
    ],
    'only ovsnet-owned ports, p2 was not left behind; replace took p1 over, and added p3 where none was',
  );
  t.equal(
    JSON.stringify(await ovs.transact([{ op: 'select', table: 'Bridge', where: [['name', '==', 'br0']], columns: ['ports'] }])).match(
      /"uuid"/g,
    )?.length,
    3,
    "the bridge holds p1 once, p3 and its own port: the replaced one went from the bridge's ports",
  );
  await ovs.deletePort('p3');
  t.equal(await ovs.interfaceType('p1'), '', 'a kernel device\'s interface has type ""');
  t.equal(await ovs.interfaceType('br0'), 'internal', "the bridge's own interface is internal");
  t.equal(await ovs.interfaceType('nope'), undefined, 'no such interface');
  t.equal(await ovs.deletePort('p1', { 'ovsnet-endpoint': 'e3' }), false, "marked as another endpoint's: it stays");
  t.equal(await ovs.interfaceType('p1'), '', 'still there');
  t.equal(await ovs.deletePort('p1', { 'ovsnet-endpoint': 'e1' }), true, 'marked as its own: it goes');
  await ovs.addPort('br0', 'p1', { tag: 8, externalIds: { 'ovsnet-endpoint': 'e1' } });
  t.equal(await ovs.deletePort('p1'), true, 'deletePort says there was a port');
  t.equal(await ovs.deletePort('p1'), false, 'and, again, that there was none: done all the same');
  t.same(await ovs.ownPorts(), []);
});

t.test("a bridge's ports' OpenFlow numbers, in one transaction: numbered ports of that bridge only", async (t) => {
  const ovs = await serverAndClient(t, 300);
  init();
  for (const br of ['br0', 'br1']) await ovs.ensureBridge(br, 'netdev', 'secure').catch(() => undefined);
  for (const [br, port] of [
    ['br0', 'p1'],
    ['br0', 'p2'],
    ['br0', 'p3'],
    ['br1', 'q1'],
  ] as const)
    await ovs.addPort(br, port, { tag: 7, externalIds: {} });
  // What ovs-vswitchd writes once it has the ports: a number, -1 when it could not, LOCAL's.
  const number = (name: string, ofport: number) => ({ op: 'update', table: 'Interface', where: [['name', '==', name]], row: { ofport } });
  await ovs.transact([number('p1', 5), number('p2', -1), number('q1', 6), number('br0', 65534), number('br1', 65534)]);
  t.same([...(await ovs.bridgeOfports('br0'))], [['p1', 5]], "p1 only: p2 failed, p3 not numbered yet, LOCAL and br1's ports left out");
  t.same([...(await ovs.bridgeOfports('br1'))], [['q1', 6]]);
  t.same([...(await ovs.bridgeOfports('nobr'))], [], 'no bridge: none');
});

t.test('fail mode and flow-restore-wait: read and written in OVSDB, other keys left alone', async (t) => {
  const ovs = await serverAndClient(t, 300);
  // No ovs-vswitchd here: the writes land, the wait for it to apply them times out.
  await ovs.ensureBridge('brsec', 'netdev', 'secure').catch(() => undefined);
  t.equal(await ovs.failMode('brsec'), 'secure', 'made in the fail mode asked for');
  t.equal(await ovs.failMode('nobr'), undefined, 'no bridge: undefined');
  await ovs.ensureBridge('brsec', 'netdev', 'standalone').catch(() => undefined);
  t.equal(await ovs.failMode('brsec'), 'secure', 'an existing bridge is left as it is');
  await ovs.setFailMode('brsec', 'standalone').catch(() => undefined);
  t.equal(await ovs.failMode('brsec'), 'standalone');
  spawnSync('ovs-vsctl', [`--db=unix:${sock}`, '--no-wait', 'clear', 'bridge', 'brsec', 'fail_mode']);
  t.equal(await ovs.failMode('brsec'), '', "unset: '' (OVS's standalone)");
  spawnSync('ovs-vsctl', [`--db=unix:${sock}`, '--no-wait', 'set', 'open_vswitch', '.', 'other_config:keep=me']);
  t.equal(await ovs.flowRestoreWait(), false);
  await ovs.setFlowRestoreWait(true);
  await ovs.setFlowRestoreWait(true);
  t.equal(await ovs.flowRestoreWait(), true, 'set (twice: idempotent)');
  await ovs.setFlowRestoreWait(false);
  await ovs.setFlowRestoreWait(false);
  t.equal(await ovs.flowRestoreWait(), false, 'cleared (twice: idempotent)');
  spawnSync('ovs-vsctl', [`--db=unix:${sock}`, '--no-wait', 'set', 'open_vswitch', '.', 'other_config:flow-restore-wait=false']);
  await ovs.setFlowRestoreWait(true);
  t.equal(await ovs.flowRestoreWait(), true, 'a "false" left by hand becomes true');
  const other = spawnSync('ovs-vsctl', [`--db=unix:${sock}`, '--no-wait', 'get', 'open_vswitch', '.', 'other_config:keep'], {
    encoding: 'utf8',
  });
  t.equal(other.stdout.trim(), 'me', 'other keys of other_config untouched');
  await ovs.setFlowRestoreWait(false);
});

t.test(
  'ofports: the OpenFlow number of each interface named, in one transaction; none yet or -1: undefined; no interface: absent',
  async (t) => {
    const ovs = await serverAndClient(t, 500);
    init();
    await ovs.ensureBridge('br0', 'netdev', 'standalone').catch(() => undefined); // no ovs-vswitchd: the row is written
    await ovs.addPort('br0', 'q1', { tag: 7, externalIds: {}, replace: true });
    await ovs.addPort('br0', 'q2', { tag: 7, externalIds: {}, replace: true });
    await ovs.addPort('br0', 'q3', { tag: 7, externalIds: {}, replace: true });
    t.same([...(await ovs.ofports([]))], [], 'no names: no transaction');
    t.same([...(await ovs.ofports(['q1', 'nothere']))], [['q1', undefined]], 'no number given yet (ovs-vswitchd gives them)');
    // What ovs-vswitchd writes: a number, or -1 when it could not add the interface.
    await ovs.transact([{ op: 'update', table: 'Interface', where: [['name', '==', 'q2']], row: { ofport: 12 } }]);
    await ovs.transact([{ op: 'update', table: 'Interface', where: [['name', '==', 'q3']], row: { ofport: -1 } }]);
    const got = await ovs.ofports(['q1', 'q2', 'q3', 'nothere', 'q2']);
    t.same([...got].sort(), [
      ['q1', undefined],
      ['q2', 12],
      ['q3', undefined],
    ]);
    for (const name of ['q1', 'q2', 'q3']) await ovs.deletePort(name);
  },
);

t.test('a lost server fails requests fast, is reported once and re-dialled', async (t) => {
  await startServer();
  let lost = 0;
  const ovs = new Ovsdb(`unix:${sock}`, 1000, undefined, () => (lost += 1));
  t.teardown(async () => {
    ovs.close();
    await stopServer();
  });
  t.ok(await ovs.bridgeExists('br0'));
  t.equal(lost, 0);
  await stopServer();
  const started = Date.now();
  await t.rejects(ovs.bridgeExists('br0'), { code: 'OVS_UNAVAILABLE', message: /cannot reach OVSDB|lost/ });
  t.ok(Date.now() - started < 1500, 'fails within the bound');
  t.equal(lost, 1, 'onLost: once for the connection that dropped');
  await startServer();
  let ok = false;
  for (let i = 0; i < 40 && !ok; i++) ok = await ovs.bridgeExists('br0').catch(() => false);
  t.ok(ok, 'works again once the server is back');
  t.equal(lost, 1, 'dials that failed meanwhile are no loss of their own');
  ovs.close();
  await new Promise((r) => setTimeout(r, 50));
  t.equal(lost, 1, 'close() is no loss');
});

t.test('control commands over an OVS unixctl socket, found through the PID file beside the OVSDB socket', async (t) => {
  // ovsdb-server's control socket speaks what ovs-vswitchd's does; the run directory names it as
  // ovs-vswitchd's would be (ovs-vswitchd.pid, ovs-vswitchd.PID.ctl).
  await serverAndClient(t, 1000);
  const run = fs.mkdtempSync(path.join(dir, 'run-'));
  t.equal(Vswitchd.besideOvsdb('tcp:192.0.2.1:6640', 1000), undefined, 'no control socket for a remote OVSDB');
  const v = Vswitchd.besideOvsdb(`unix:${path.join(run, 'db.sock')}`, 1000);
  if (v === undefined) throw new Error('a unix OVSDB socket has one');
  await t.rejects(v.command('version'), { code: 'OVS_UNAVAILABLE', message: /cannot read .*ovs-vswitchd\.pid.*is ovs-vswitchd running\?/ });
  fs.writeFileSync(path.join(run, 'ovs-vswitchd.pid'), '4242\n');
  await t.rejects(v.command('version'), {
    code: 'OVS_UNAVAILABLE',
    message: /cannot reach ovs-vswitchd at unix:.*ovs-vswitchd\.4242\.ctl.*PID 4242/,
  });
  fs.symlinkSync(path.join(dir, 'ctl'), path.join(run, 'ovs-vswitchd.4242.ctl'));
  t.match(await v.command('version'), /\(Open vSwitch\) \d+\.\d+/);
  await t.rejects(v.command('no/such-command'), {
    code: 'OVS_FAILED',
    message: /ovs-vswitchd no\/such-command failed: "no\/such-command" is not a valid command/,
  });
  t.match(await v.command('list-commands'), /version/, 'one connection per command: still answers');
});

/**
 * A peer that answers every request with the next scripted reply (the request's id put in
 * where the reply says ID). Issue 11, item 5: a malformed reply fails that request, never the
 * process, and the next request works on a new connection.
 */
async function scriptedPeer(t: { teardown: (f: () => void) => void }, name: string, replies: string[]): Promise<string> {
  const at = path.join(dir, name);
  const srv = net.createServer((c) => {
    const split = new JsonSplitter();
    c.setEncoding('utf8');
    c.on('data', (d: string) => {
      for (const req of split.push(d) as { id: number }[]) c.write((replies.shift() ?? '').replaceAll('ID', String(req.id)));
    });
  });
  await new Promise<void>((r) => srv.listen(at, r));
  t.teardown(() => srv.close());
  return `unix:${at}`;
}

t.test('a peer sending garbage or wrong-shaped replies fails those requests only', async (t) => {
  const sel = (rows: string) => `{"id":ID,"error":null,"result":[{"rows":${rows}}]}`;
  const target = await scriptedPeer(t, 'garbage.sock', [
    '}}}{"id":ID',
    '{"id":ID,"result":{"not" "json"}}',
    '{"id":ID,"error":null,"result":"nope"}',
    sel('"x"'),
    sel('[{"_uuid":7}]'),
    sel('[{"name":"p","_uuid":["uuid","u"],"external_ids":"x"}]'),
    '{"id":ID,"error":null,"result":[{}, {"rows":5}]}',
    '{"id":ID,"error":null,"result":[{"rows":[{"ports":"x"}]},{"rows":[]},{"rows":[]}]}',
    sel('[{"name":"br0"}]'),
  ]);
  const ovs = new Ovsdb(target, 1000);
  t.teardown(() => ovs.close());
  await t.rejects(ovs.bridgeExists('br0'), {
    code: 'OVS_FAILED',
    message: /OVSDB at unix:.*garbage\.sock sent a stray "}" outside any message; the connection is dropped and dialled again/,
  });
  await t.rejects(ovs.bridgeExists('br0'), { code: 'OVS_FAILED', message: /sent a message that is not JSON/ });
  await t.rejects(ovs.bridgeExists('br0'), {
    code: 'OVS_FAILED',
    message: 'OVSDB answered transact with a malformed reply (not a list of one result object per operation): "nope"',
  });
  await t.rejects(ovs.bridgeExists('br0'), { code: 'OVS_FAILED', message: /its rows are not a list of objects/ });
  await t.rejects(ovs.deletePort('p'), { code: 'OVS_FAILED', message: /a _uuid is not \["uuid", "\.\.\."\]\): 7/ });
  await t.rejects(ovs.ownPorts(), { code: 'OVS_FAILED', message: /a map column is not/ });
  await t.rejects(ovs.waitApplied(), { code: 'OVS_FAILED', message: /its rows are not a list of objects/ });
  await t.rejects(ovs.bridgeOfports('br0'), { code: 'OVS_FAILED', message: /a _uuid is not \["uuid", "\.\.\."\]\): "x"/ });
  t.ok(await ovs.bridgeExists('br0'), 'a good reply after all that is taken');
});

t.test('ovs-vswitchd control socket sending garbage fails the command, not the process', async (t) => {
  const run = fs.mkdtempSync(path.join(dir, 'vsd-'));
  fs.writeFileSync(path.join(run, 'ovs-vswitchd.pid'), '4242\n');
  await scriptedPeer(t, path.relative(dir, path.join(run, 'ovs-vswitchd.4242.ctl')), ['{"id":ID,"result":}']);
  const vswitchd = new Vswitchd(run, 1000);
  await t.rejects(vswitchd.purgeFlows(), { code: 'OVS_FAILED', message: /ovs-vswitchd at unix:.* sent a message that is not JSON/ });
});
