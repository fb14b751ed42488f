/**
 * ovsnet trace across hosts through the store (src/cluster/traces.ts): a peer's daemon answers
 * a well-formed request with its bridge's trace, refuses anything else (no ovs-vswitchd command
 * run for it), answers at most 5 a second, and the asker's lease takes both keys away.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import t, { type Test } from 'tap';
import { checkTraceFlow, TraceAnswerer, tracePeer } from '../../src/cluster/traces.js';
import { peerPass } from '../../src/cli/trace/peer.js';
import { tunnelName } from '../../src/driver/vxlan/tunnels.js';
import type { NetworkRecord } from '../../src/driver/model/records.js';
import { createLogger } from '../../src/lib/log.js';
import { keys } from '../../src/store/keys.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import { put } from '../../src/store/types.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-traces-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

const FLOW =
  'tcp,tp_src=40000,tp_dst=7001,tcp_flags=syn,in_port=ovx000001a1b2c3,tun_id=1,tun_src=10.200.6.1,tun_dst=10.200.6.2,dl_src=02:0f:00:00:00:01,dl_dst=02:42:0a:d6:00:41,nw_src=10.214.0.4,nw_dst=10.214.0.65';

t.test('the flows ovsnet trace writes pass; anything else is refused naming the part', async (t) => {
  t.equal(checkTraceFlow(FLOW), FLOW);
  t.ok(
    checkTraceFlow(
      'icmp6,icmp_type=128,icmp_code=0,in_port=p1,dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:02,ipv6_src=fd00::1,ipv6_dst=fd00::2',
    ),
  );
  const bad = [
    '',
    `${FLOW},actions=drop`,
    `${FLOW} --generate`,
    FLOW.replace('tp_dst=7001', 'tp_dst=70001'),
    FLOW.replace('nw_dst=10.214.0.65', 'nw_dst=10.214.0.065'),
    FLOW.replace('in_port=ovx000001a1b2c3', 'in_port=LOCAL;reboot'),
    FLOW.replace('dl_src=02:0f:00:00:00:01', 'dl_src=02:0f:00:00:00:01\nfoo'),
    `${FLOW},nw_dst=10.0.0.1`,
    'tcp,'.repeat(400),
    'x'.repeat(5000),
    'ip,tun_id=16777216',
    'ip,ipv6_src=10.0.0.1',
  ];
  for (const flow of bad) t.throws(() => checkTraceFlow(flow), { code: 'TRACE_REQUEST_INVALID' }, JSON.stringify(flow.slice(0, 60)));
  t.throws(() => checkTraceFlow(42), { code: 'TRACE_REQUEST_INVALID' });
  t.throws(() => checkTraceFlow(`${FLOW},actions=drop`), {
    message: /"actions=drop" is not one of its fields.*expected comma-separated fields/,
  });
});

function setup(t: Test, calls: string[][] = []) {
  const store = new SqliteStore({ file: path.join(dir, `${Math.random().toString(16).slice(2)}.db`) });
  const answerer = new TraceAnswerer({
    store,
    log: createLogger('silent'),
    self: 'h2',
    bridge: 'ovsnet0',
    command: (method, params) => {
      calls.push([method, ...params]);
      return Promise.resolve(
        method === 'dpif/show' ? 'netdev@ovs-netdev:\n  ovsnet0:\n    ovh1 5/7: (system)\n' : `trace of ${params[1] ?? ''}`,
      );
    },
  });
  t.teardown(async () => {
    await answerer.stop();
    await store.close();
  });
  return { store, answerer, calls };
}

t.test("a peer's request is traced on this bridge, with the port listing; the lease takes both keys", async (t) => {
  const { store, answerer, calls } = setup(t);
  await answerer.start();
  const answer = await tracePeer(store, 'h2', 'h1', FLOW);
  t.equal(answer.trace, `trace of ${FLOW}`);
  t.match(answer.ports, /ovh1 5\/7/);
  t.equal(answer.bridge, 'ovsnet0');
  t.same(calls[0], ['ofproto/trace', 'ovsnet0', FLOW, ...Array.from({ length: 8 }, () => ['--ct-next', 'trk,new']).flat()]);
  t.same((await store.list(keys.traceRequests('h2'))).kvs, [], 'no request left');
  t.same((await store.list(keys.traceAnswer('').slice(0, -1))).kvs, [], 'no answer left');
});

t.test('a request no daemon answers: said, with what to do', async (t) => {
  const { store } = setup(t);
  await t.rejects(tracePeer(store, 'h3', 'h1', FLOW, 300), {
    code: 'TRACE_PEER_SILENT',
    message: /host h3's ovsnet did not trace its half.*run ovsnet trace on h3/,
  });
});

t.test('hostile requests put straight into the store: no command run, an error answered, nothing else changes', async (t) => {
  const { store, answerer, calls } = setup(t);
  await answerer.start();
  const lease = await store.grantLease(30);
  const bodies = [
    'not json',
    JSON.stringify({ flow: `${FLOW},actions=output:1` }),
    JSON.stringify({ flow: 7 }),
    JSON.stringify({ flow: 'x'.repeat(3000) }),
  ];
  for (const [i, body] of bodies.entries())
    await store.txn({ compares: [], success: [{ type: 'put', key: `${keys.traceRequests('h2')}bad${i}`, value: body, lease }] });
  await new Promise((r) => setTimeout(r, 500));
  t.same(calls, [], 'ovs-vswitchd was asked nothing');
  const answers = (await store.list(keys.traceAnswer('').slice(0, -1))).kvs.map((kv) => JSON.parse(kv.value) as { error?: string });
  t.equal(answers.length, 4);
  t.ok(
    answers.every((a) => typeof a.error === 'string' && a.error.length <= 1000),
    'each answered with why',
  );
  await store.revokeLease(lease);
  t.same((await store.list(keys.traceAnswer('').slice(0, -1))).kvs, [], "the answers went with the asker's lease");
});

t.test('at most 5 answered a second; the rest left to expire', async (t) => {
  const { store, answerer, calls } = setup(t);
  await answerer.start();
  const lease = await store.grantLease(30);
  for (let i = 0; i < 12; i++)
    await store.txn({
      compares: [],
      success: [{ type: 'put', key: `${keys.traceRequests('h2')}r${i}`, value: JSON.stringify({ flow: FLOW }), lease }],
    });
  await new Promise((r) => setTimeout(r, 500));
  t.ok(calls.filter((c) => c[0] === 'ofproto/trace').length <= 5, `${calls.length / 2} traced`);
  await store.revokeLease(lease);
});

t.test('fuzz: no generated flow with a character outside the fields passes, nor one with a field twice', async () => {
  const part = fc.oneof(
    fc.constantFrom('ip', 'tcp', 'icmp6', 'in_port=ovh1', 'tp_dst=80', 'nw_dst=10.0.0.1', 'dl_src=02:00:00:00:00:01'),
    fc.string({ maxLength: 40 }),
    fc.constantFrom('actions=drop', 'in_port=a b', 'tp_dst=-1', 'nw_dst=::1', 'tun_id=0x10', '\n', ';', '--generate', 'tcp_flags=ack'),
  );
  fc.assert(
    fc.property(fc.array(part, { minLength: 1, maxLength: 12 }), (parts) => {
      const flow = parts.join(',');
      let ok = true;
      try {
        checkTraceFlow(flow);
      } catch {
        ok = false;
      }
      if (!ok) return true;
      const keys = flow.split(',').map((p) => p.split('=')[0]);
      return /^[A-Za-z0-9_.:=,-]+$/.test(flow) && new Set(keys).size === keys.length;
    }),
    { numRuns: 3000 },
  );
});

t.test("the CLI's peer pass: the packet as it left (as sent, when no flow rewrote it), traced on the peer", async (t) => {
  const calls: string[][] = [];
  const { store, answerer } = setup(t, calls);
  await answerer.start();
  for (const [name, vtepIp] of [
    ['h1', '10.200.6.1'],
    ['h2', '10.200.6.2'],
  ] as const)
    await store.txn({ compares: [], success: [put(keys.host(name), JSON.stringify({ name, vtepIp, machineId: name, startedAt: '' }))] });
  const network = { networkId: 'n1', host: 'h1', logical: 'blue', vni: 7, tag: 1 } as unknown as NetworkRecord;
  const base = {
    store,
    self: 'h1',
    network,
    outcome: { kind: 'tunnel' as const, ports: [], detail: '', remote: '10.200.6.2' },
    proto: 'tcp' as const,
    six: false,
    src: '10.210.0.2',
    dst: '10.210.0.3',
    networks: [],
    l4: 'tcp,tp_src=40000,tp_dst=80,tcp_flags=syn',
    sent: { dl_src: '02:42:0a:d2:00:02', dl_dst: '02:42:0a:d2:00:03' },
  };
  const unchanged = await peerPass({ ...base, pass: { steps: [], datapathActions: '', fields: {}, leaving: {} } });
  t.notOk('note' in unchanged, 'traced on the peer');
  const asked = calls.find((c) => c[0] === 'ofproto/trace')?.[2] ?? '';
  // On the peer, the packet comes in by its tunnel to this host: named by this host's address.
  const inPort = tunnelName(7, '10.200.6.1') ?? 'none';
  t.match(
    asked,
    `in_port=${inPort},tun_id=7,tun_src=10.200.6.1,tun_dst=10.200.6.2,dl_src=02:42:0a:d2:00:02,dl_dst=02:42:0a:d2:00:03,nw_src=10.210.0.2,`,
  );
  calls.length = 0;
  await peerPass({
    ...base,
    pass: { steps: [], datapathActions: '', fields: {}, leaving: { dl_src: '02:0f:00:00:00:07', dl_dst: '02:42:0a:d2:00:09' } },
  });
  t.match(
    calls.find((c) => c[0] === 'ofproto/trace')?.[2] ?? '',
    /dl_src=02:0f:00:00:00:07,dl_dst=02:42:0a:d2:00:09/,
    'rewritten MACs as they left',
  );
  const unknown = await peerPass({
    ...base,
    outcome: { ...base.outcome, remote: '10.9.9.9' },
    pass: { steps: [], datapathActions: '', fields: {}, leaving: {} },
  });
  t.match(
    unknown,
    { note: /the rest of its way is the peer's \(10\.9\.9\.9\): ovsnet trace there/ },
    'a tunnel to no registered host: said',
  );
});
