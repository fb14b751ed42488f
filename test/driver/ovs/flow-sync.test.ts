/**
 * How FlowSync calls ovs-ofctl (a scripted one; the real one runs in test/e2e): one diff-flows
 * read, meters before the bundle and stale ones after, one bundle of every flow change, and
 * nothing written when nothing is to change; with the bridge's management socket (a switch of
 * the test's own), the meters and groups read over OpenFlow instead of ovs-ofctl.
 */
import t from 'tap';
import { OWN } from '../../../src/driver/ovs/cookies.js';
import { FlowSync } from '../../../src/driver/ovs/flow-sync.js';
import { OpenFlow } from '../../../src/driver/ovs/openflow.js';
import { stdinText, type Stdin } from '../../../src/lib/exec.js';
import { fakeSwitch, groupDesc, meterConfig, msg, multipartReply } from '../../helpers/fake-switch.js';

type Answer = { code: number; stdout: string; stderr: string };
const ok = (stdout = ''): Answer => ({ code: 0, stdout, stderr: '' });

interface Call {
  args: string[];
  input?: string;
  /** diff-flows: the wanted flows' file, read while the call runs. */
  wanted?: string;
  file?: string;
}

/** A scripted ovs-ofctl: `answer` by verb, every call kept. */
function scripted(answer: (verb: string, args: readonly string[], input?: Stdin) => Answer, mgmt?: string) {
  const calls: Call[] = [];
  const run = async (_cmd: string, args: readonly string[], input?: Stdin) => {
    const verb = args.find((a) => /^[a-z]+-[a-z]+$/.test(a)) ?? '';
    const call: Call = { args: [...args], ...(typeof input === 'string' ? { input } : {}) };
    if (typeof input === 'object') {
      call.file = args.at(-1) ?? '';
      call.wanted = input.file;
    }
    calls.push(call);
    return answer(verb, args, input);
  };
  return {
    sync: new FlowSync(new OpenFlow(run, 1), () => mgmt, 2000),
    calls,
    verbs: () => calls.map((c) => c.args.find((a) => /^[a-z]+-[a-z]+$/.test(a))),
  };
}

const BASE = 'cookie=0xf5c000000000000,priority=0,actions=NORMAL';
const GUARD = 'cookie=0xf5e000000000005,priority=100,tun_id=5,arp,arp_tpa=10.0.0.1,actions=drop';
const M1 = 0x0f5d0001;
const M2 = 0x0f5d0002;
const M3 = 0x0f5d0003;
const spec = (id: number, rate: number) => `meter=${id},kbps,burst,stats,bands=type=drop,rate=${rate},burst_size=${rate}`;
const dumped = (id: number, rate: number) => `meter=${id} kbps burst stats bands=\ntype=drop rate=${rate} burst_size=${rate}\n`;
const METERS_HEAD = 'OFPST_METER_CONFIG reply (OF1.3) (xid=0x2):\n';

t.test('nothing to change: one diff-flows (and dump-meters only when meters are wanted), no write', async (t) => {
  const flowsOnly = scripted(() => ok());
  const changes = await flowsOnly.sync.sync('br0', OWN, { flows: [BASE, GUARD] });
  t.same(flowsOnly.verbs(), ['diff-flows']);
  t.same(flowsOnly.calls[0]?.args.slice(0, 4), ['-O', 'OpenFlow13', 'diff-flows', 'br0']);
  t.equal(flowsOnly.calls[0]?.wanted, `${BASE}\n${GUARD}\n`, 'the wanted flows, one a line, as stdin given as a file');
  t.equal(flowsOnly.calls[0]?.file, '/dev/stdin', 'diff-flows reads it by /dev/stdin (it takes only files)');
  t.same(changes, {
    flows: { lines: [], added: 0, modified: 0, deleted: 0 },
    meters: { add: [], modify: [], remove: [] },
    groups: { add: [], modify: [], remove: [] },
  });

  const withMeters = scripted((verb) => (verb === 'dump-meters' ? ok(METERS_HEAD + dumped(M1, 100) + dumped(7, 1)) : ok()));
  const c = await withMeters.sync.sync('br0', OWN, { flows: [BASE], meters: new Map([[M1, spec(M1, 100)]]) });
  t.same(withMeters.verbs(), ['diff-flows', 'dump-meters'], 'two reads, nothing else');
  t.same(withMeters.calls[1]?.args, ['-O', 'OpenFlow13', 'dump-meters', 'br0']);
  t.same(c.meters, { add: [], modify: [], remove: [] }, "the same meter written either way; another controller's meter 7 left alone");

  const empty = scripted(() => ok());
  await empty.sync.sync('br0', OWN, { flows: [] });
  t.equal(empty.calls[0]?.wanted, '', 'no flow wanted: an empty file (every flow of the scope goes)');
});

t.test('changes: meters added and modified before the bundle, the bundle once, stale meters deleted after', async (t) => {
  const diff = [
    `+priority=100,arp,tun_id=0x5,arp_tpa=10.0.0.1 cookie=0xf5e000000000005 actions=drop`,
    `+priority=0 cookie=0xf5c000000000000 actions=NORMAL`,
    `-priority=300,in_port=9 cookie=0xf5d000000000009 actions=meter:${M3},NORMAL`,
    '-priority=5,ip,nw_dst=1.2.3.4 actions=drop',
  ].join('\n');
  const { sync, calls, verbs } = scripted((verb) =>
    verb === 'diff-flows'
      ? { code: 2, stdout: `${diff}\n`, stderr: '' }
      : verb === 'dump-meters'
        ? ok(METERS_HEAD + dumped(M2, 100) + dumped(M3, 100) + dumped(7, 1))
        : ok(),
  );
  const wanted = {
    flows: [BASE, GUARD],
    meters: new Map([
      [M1, spec(M1, 100)],
      [M2, spec(M2, 200)],
    ]),
  };
  const changes = await sync.sync('br0', OWN, wanted);
  t.same(verbs(), ['diff-flows', 'dump-meters', 'add-meter', 'mod-meter', 'add-flows', 'del-meter']);
  t.same(calls[2]?.args, ['-O', 'OpenFlow13', 'add-meter', 'br0', spec(M1, 100)]);
  t.same(calls[3]?.args, ['-O', 'OpenFlow13', 'mod-meter', 'br0', spec(M2, 200)]);
  t.same(calls[4]?.args, ['-O', 'OpenFlow14', '--bundle', 'add-flows', 'br0', '-'], 'one bundle, OpenFlow 1.4, from stdin');
  t.equal(
    calls[4]?.input,
    [
      'add priority=100,arp,tun_id=0x5,arp_tpa=10.0.0.1 cookie=0xf5e000000000005 actions=drop',
      'add priority=0 cookie=0xf5c000000000000 actions=NORMAL',
      'delete_strict table=0 priority=300,in_port=9',
      '',
    ].join('\n'),
    'the foreign flow (no cookie) is not in it',
  );
  t.same(calls[5]?.args, ['-O', 'OpenFlow13', 'del-meter', 'br0', `meter=${M3}`], 'after the flows that used it are gone');
  t.match(changes, { flows: { added: 2, modified: 0, deleted: 1 }, meters: { add: [M1], modify: [M2], remove: [M3] } });
});

t.test('meters only: no bundle', async (t) => {
  const { sync, verbs } = scripted((verb) => (verb === 'dump-meters' ? ok(METERS_HEAD) : ok()));
  await sync.sync('br0', OWN, { flows: [BASE], meters: new Map([[M1, spec(M1, 100)]]) });
  t.same(verbs(), ['diff-flows', 'dump-meters', 'add-meter']);
});

t.test('diff() reads and changes nothing', async (t) => {
  const { sync, verbs } = scripted((verb) =>
    verb === 'diff-flows' ? { code: 2, stdout: '+priority=0 cookie=0xf5c000000000000 actions=NORMAL\n', stderr: '' } : ok(METERS_HEAD),
  );
  const changes = await sync.diff('br0', OWN, { flows: [BASE], meters: new Map([[M1, spec(M1, 100)]]) });
  t.same(verbs(), ['diff-flows', 'dump-meters']);
  t.match(changes, { flows: { added: 1 }, meters: { add: [M1] } });
});

t.test('diff-flows exiting 1 fails the sync (OVS_FAILED, the command and its stderr), nothing written', async (t) => {
  const { sync, verbs } = scripted(() => ({ code: 1, stdout: '', stderr: 'ovs-ofctl: br0 is not a bridge or a socket\n' }));
  await t.rejects(sync.sync('br0', OWN, { flows: [BASE] }), {
    code: 'OVS_FAILED',
    message:
      /^ovs-ofctl -O OpenFlow13 diff-flows br0 \S+ failed \(1\): ovs-ofctl: br0 is not a bridge or a socket; is ovs-vswitchd running/,
  });
  t.same(verbs(), ['diff-flows']);
});

t.test("a refused bundle: OVS_FAILED saying the bridge's flows are as they were; stale meters kept", async (t) => {
  const { sync, verbs } = scripted((verb) =>
    verb === 'diff-flows'
      ? {
          code: 2,
          stdout: `+priority=0 cookie=0xf5c000000000000 actions=NORMAL\n-priority=300,in_port=9 cookie=0xf5d000000000009 actions=meter:${M3},NORMAL\n`,
          stderr: '',
        }
      : verb === 'add-flows'
        ? { code: 1, stdout: '', stderr: 'ovs-ofctl: br0: negotiated OpenFlow version 0x04 (OpenFlow13) does not support bundles\n' }
        : ok(METERS_HEAD + dumped(M3, 100)),
  );
  await t.rejects(sync.sync('br0', OWN, { flows: [BASE], meters: new Map() }), {
    code: 'OVS_FAILED',
    message:
      /^ovs-ofctl -O OpenFlow14 --bundle add-flows br0 - failed \(1\): .*does not support bundles; .*the bundle was refused whole, the bridge's flows are as they were \(does the bridge allow OpenFlow14 and 15: ovs-vsctl get bridge br0 protocols\?\)$/,
  });
  t.same(verbs(), ['diff-flows', 'dump-meters', 'add-flows'], 'no del-meter: a flow still on the bridge may use the meter');
});

t.test('a wanted flow outside the scope is refused before anything is written', async (t) => {
  const { sync, verbs } = scripted((verb) =>
    verb === 'diff-flows' ? { code: 2, stdout: '+priority=5,ip actions=drop\n', stderr: '' } : ok(),
  );
  await t.rejects(sync.sync('br0', OWN, { flows: ['priority=5,ip,actions=drop'] }), /outside ovsnet's cookie scope/);
  t.same(verbs(), ['diff-flows']);
});

t.test('groups: compared with dump-groups, added and modified before the flows in one bundle, stale ones deleted after', async (t) => {
  const own = (id: number) => id > 0x0f610000 && id <= 0x0f61ffff;
  const G1 = 'type=select,bucket=bucket_id:0,actions=ct(commit,table=52,zone=4101,nat(dst=10.90.0.7))';
  const G2 = 'type=select,bucket=bucket_id:0,actions=ct(commit,table=52,zone=4101,nat(dst=10.90.0.8))';
  let bundled = '';
  const s = scripted((verb, args, input) => {
    if (verb === 'diff-flows') return { code: 2, stdout: '+priority=0 cookie=0xf5c000000000000 actions=NORMAL\n', stderr: '' };
    if (verb === 'dump-groups') return ok(` group_id=${0x0f610002},${G2}\n group_id=${0x0f610003},${G1}\n group_id=9,type=all\n`);
    if (args.includes('bundle')) {
      t.equal(args.at(-1), '/dev/stdin', 'the bundle is read from stdin, a file');
      bundled = stdinText(input);
    }
    return ok();
  });
  const wanted = {
    flows: [BASE],
    groups: {
      specs: new Map([
        [0x0f610001, G1],
        [0x0f610002, G2],
      ]),
      own,
    },
  };
  const changes = await s.sync.sync('br0', OWN, wanted);
  t.same(changes.groups, { add: [0x0f610001], modify: [], remove: [0x0f610003] });
  t.same(
    bundled.trim().split('\n'),
    [
      `group add group_id=${0x0f610001},${G1}`,
      'flow add priority=0 cookie=0xf5c000000000000 actions=NORMAL',
      `group delete group_id=${0x0f610003}`,
    ],
    'one bundle: the new group, then the flows, then the stale group; group 9 (not ours) untouched',
  );
  t.ok(
    s.calls.some((c) => c.args.includes('OpenFlow15') && c.args.includes('bundle')),
    'in OpenFlow 1.5 (groups with bucket IDs)',
  );
});

t.test('groups already right: no bundle at all', async (t) => {
  const own = (id: number) => id > 0x0f610000 && id <= 0x0f61ffff;
  const G1 = 'type=select,bucket=bucket_id:0,actions=ct(commit,table=52,zone=4101,nat(dst=10.90.0.7))';
  const s = scripted((verb) => (verb === 'dump-groups' ? ok(` group_id=${0x0f610001},${G1}\n`) : ok()));
  const changes = await s.sync.sync('br0', OWN, { flows: [BASE], groups: { specs: new Map([[0x0f610001, G1]]), own } });
  t.same(changes.groups, { add: [], modify: [], remove: [] });
  t.notOk(
    s.calls.some((c) => c.args.includes('bundle') || c.args.includes('--bundle')),
    'nothing written',
  );
});

t.test('the wanted flows go as a file on stdin, whether the call succeeded or failed (exec.ts: it has no name)', async (t) => {
  for (const code of [0, 2, 1]) {
    const { sync, calls } = scripted(() => ({ code, stdout: '', stderr: code === 1 ? 'failed\n' : '' }));
    await sync.diff('br0', OWN, { flows: [BASE] }).catch(() => undefined);
    t.same([calls[0]?.file, calls[0]?.wanted], ['/dev/stdin', `${BASE}\n`], `exit ${code}`);
  }
});

t.test(
  "with the management socket: meters and groups' IDs over OpenFlow, diff-flows the only read run; ovsnet's stale ones go, another's stay",
  async (t) => {
    const own = (id: number) => id > 0x0f610000 && id <= 0x0f61ffff;
    const sw = await fakeSwitch(t, (m) => {
      const [type, xid] = [m.readUInt8(1), m.readUInt32BE(4)];
      if (type === 18 && m.readUInt16BE(8) === 10) {
        return multipartReply(
          xid,
          Buffer.concat([meterConfig(13, M1, [[1, 100, 100, 0]]), meterConfig(13, M2, [[1, 5, 5, 0]]), meterConfig(13, 7, [[1, 1, 1, 0]])]),
          false,
        );
      }
      if (type === 18 && m.readUInt16BE(8) === 7)
        return multipartReply(xid, Buffer.concat([groupDesc(0x0f610002, 16), groupDesc(9)]), false, 7);
      return type === 20 ? msg(21, xid) : undefined;
    });
    const s = scripted(() => ok(), sw.socket);
    const changes = await s.sync.sync('br0', OWN, {
      flows: [BASE],
      meters: new Map([[M1, spec(M1, 100)]]),
      groups: { specs: new Map(), own },
    });
    t.same(changes.meters, { add: [], modify: [], remove: [M2] }, "M1 as wanted, M2 not wanted any more, meter 7 another controller's");
    t.same(changes.groups, { add: [], modify: [], remove: [0x0f610002] }, "ovsnet's group goes, group 9 stays");
    t.same(
      s.calls.map((c) => c.args.filter((a) => !a.startsWith('-') && a !== 'br0' && a !== 'OpenFlow13' && a !== 'OpenFlow15')[0]),
      ['diff-flows', 'bundle'],
      "no dump-meters, no dump-groups: the only processes are the flows' read and the bundle deleting the group",
    );
    t.match(s.calls[1]?.wanted ?? '', `group delete group_id=${0x0f610002}`);
    const deleted = sw.seen.filter((m) => m.readUInt8(1) === 29 && m.readUInt16BE(8) === 2).map((m) => m.readUInt32BE(12));
    t.same(deleted, [M2], 'the stale meter deleted over OpenFlow');
  },
);
