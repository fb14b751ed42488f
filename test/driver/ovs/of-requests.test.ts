/**
 * OpenFlow requests on connections of their own (src/driver/ovs/of-requests.ts): the METER_MOD
 * bytes OpenFlow 1.3 defines, one connection carrying every mod and a barrier, and a refusal
 * naming the meter; the meters read back (METER_CONFIG) in dump-meters' shape, and the groups'
 * IDs (GROUP_DESC). Against a switch of the test's own on a unix socket
 * (test/helpers/fake-switch.ts); the real switch is in test/e2e/restarts.test.ts and
 * driver-qos.test.ts.
 */
import fc from 'fast-check';
import t from 'tap';
import { meterShape, parseMeters } from '../../../src/driver/ovs/flow-diff.js';
import {
  groupDescRequest,
  meterConfigRequest,
  meterModMessage,
  parseGroupIds,
  parseMeterConfigs,
  readGroupIds,
  readMeters,
  sendMeterMods,
} from '../../../src/driver/ovs/of-requests.js';
import { meterSpec } from '../../../src/driver/ovs/qos-flows.js';
import { fakeSwitch, groupDesc, meterConfig, msg, multipartReply } from '../../helpers/fake-switch.js';

t.test('a METER_MOD as OpenFlow 1.3 lays it out', async (t) => {
  const spec = meterSpec(7, { rateKbps: 20000, burstKbit: 30000 }) ?? '';
  const b = meterModMessage({ command: 'add', id: 0x0f5d0007, spec }, 9);
  t.same([b.readUInt8(0), b.readUInt8(1), b.readUInt16BE(2), b.readUInt32BE(4)], [4, 29, 32, 9], 'header: OF1.3, METER_MOD, 32 bytes, xid');
  t.same([b.readUInt16BE(8), b.readUInt16BE(10), b.readUInt32BE(12)], [0, 13, 0x0f5d0007], 'add, kbps|burst|stats, the id');
  t.same(
    [b.readUInt16BE(16), b.readUInt16BE(18), b.readUInt32BE(20), b.readUInt32BE(24)],
    [1, 16, 20000, 30000],
    'one drop band: rate, burst',
  );
  const d = meterModMessage({ command: 'delete', id: 5 }, 3);
  t.same([d.readUInt16BE(2), d.readUInt16BE(8), d.readUInt32BE(12)], [16, 2, 5], 'delete: no band');
  t.throws(() => meterModMessage({ command: 'add', id: 1, spec: 'meter=1,pktps,bands=type=drop,rate=1' }, 1), /not an ovsnet meter spec/);
  t.throws(() => meterModMessage({ command: 'modify', id: 1 }, 1), /not an ovsnet meter spec/);
});

const spec = meterSpec(2, { rateKbps: 1000 }) ?? '';

t.test('every mod on one connection, then a barrier; done when the barrier is answered', async (t) => {
  const sw = await fakeSwitch(t, (m) => (m.readUInt8(1) === 20 ? msg(21, m.readUInt32BE(4)) : undefined));
  await sendMeterMods(
    sw.socket,
    [
      { command: 'add', id: 2, spec },
      { command: 'delete', id: 3 },
    ],
    2000,
  );
  t.same(
    sw.seen.map((m) => m.readUInt8(1)),
    [0, 29, 29, 20],
    'HELLO, two METER_MODs, BARRIER',
  );
  await sendMeterMods(sw.socket, [], 2000);
  t.equal(sw.seen.length, 4, 'nothing to send: no connection');
});

t.test('a refused mod is named; a barrier never answered is a timeout; a socket that is not there is said', async (t) => {
  const refusing = await fakeSwitch(t, (m) =>
    m.readUInt8(1) === 29 && m.readUInt32BE(4) === 3 ? msg(1, 3, 12) : m.readUInt8(1) === 20 ? msg(21, m.readUInt32BE(4)) : undefined,
  );
  await t.rejects(
    sendMeterMods(
      refusing.socket,
      [
        { command: 'add', id: 2, spec },
        { command: 'modify', id: 7, spec },
      ],
      2000,
    ),
    /refused meter 7 \(modify\)/,
  );
  const silent = await fakeSwitch(t, () => undefined);
  await t.rejects(sendMeterMods(silent.socket, [{ command: 'delete', id: 2 }], 200), /did not confirm 1 meter changes within 200 ms/);
  const garbage = await fakeSwitch(t, () => Buffer.from([4, 0, 0, 2, 0, 0, 0, 0]));
  await t.rejects(sendMeterMods(garbage.socket, [{ command: 'delete', id: 2 }], 2000), /not OpenFlow/);
  await t.rejects(sendMeterMods('/nonexistent/ovsnet/br.mgmt', [{ command: 'delete', id: 2 }], 2000), /cannot reach ovs-vswitchd/);
});

t.test('the meters read over OpenFlow in the shape dump-meters gives them; lengths that do not add up are refused', async (t) => {
  const r = meterConfigRequest(2);
  t.same([r.readUInt8(0), r.readUInt8(1), r.readUInt16BE(2), r.readUInt32BE(4)], [4, 18, 24, 2], 'OF1.3 MULTIPART_REQUEST, 24 bytes');
  t.same([r.readUInt16BE(8), r.readUInt32BE(16)], [10, 0xffffffff], 'METER_CONFIG, every meter');
  const ours = meterConfig(13, 0x0f5d0002, [[1, 1000, 1000, 0]]);
  const theirs = meterConfig(2, 9, [[2, 5, 7, 1]]);
  const parsed = parseMeterConfigs(Buffer.concat([ours, theirs]));
  t.equal(parsed.get(0x0f5d0002), meterShape(spec), "ovsnet's meter compares equal to the spec it was added with");
  t.equal(parsed.get(0x0f5d0002), parseMeters('meter=257 kbps burst stats bands=\ntype=drop rate=1000 burst_size=1000').get(257));
  t.equal(parsed.get(9), 'pktps bands= type=dscp_remark rate=5 prec_level=1', "another controller's: no burst flag, no burst size");
  t.throws(() => parseMeterConfigs(ours.subarray(0, 12)), /malformed meter reply: a meter of 24 bytes at 0 of 12/);
  const shortBand = Buffer.from(ours);
  shortBand.writeUInt16BE(8, 10);
  t.throws(() => parseMeterConfigs(shortBand), /a band of meter 257753090 of 8 bytes/);
  t.throws(() => parseMeterConfigs(Buffer.alloc(5)), /5 bytes left/);
  t.same([...parseMeterConfigs(Buffer.alloc(0))], [], 'no meter');
});

t.test('readMeters: one request, a reply in parts gathered; a refusal, silence and no socket said', async (t) => {
  const sw = await fakeSwitch(t, (m) =>
    m.readUInt8(1) === 18
      ? Buffer.concat([
          multipartReply(m.readUInt32BE(4), meterConfig(13, 0x0f5d0002, [[1, 1000, 1000, 0]]), true),
          msg(2, 77), // an echo request between the parts
          multipartReply(m.readUInt32BE(4), meterConfig(13, 0x0f5d0003, [[1, 64, 32, 0]]), false),
        ])
      : undefined,
  );
  const meters = await readMeters(sw.socket, 2000);
  t.same([...meters.keys()], [0x0f5d0002, 0x0f5d0003], 'both parts');
  for (let i = 0; i < 100 && sw.seen.length < 3; i++) await new Promise((r) => setTimeout(r, 10));
  t.same(
    sw.seen.map((m) => m.readUInt8(1)),
    [0, 18, 3],
    'HELLO, the request, the echo answered',
  );
  const refusing = await fakeSwitch(t, (m) => (m.readUInt8(1) === 18 ? msg(1, m.readUInt32BE(4), 12) : undefined));
  await t.rejects(readMeters(refusing.socket, 2000), /refused the OpenFlow 1\.3 connection: does the bridge allow OpenFlow13\?/);
  const silent = await fakeSwitch(t, () => undefined);
  await t.rejects(readMeters(silent.socket, 200), /did not answer the meter read within 200 ms/);
  const garbled = await fakeSwitch(t, (m) =>
    m.readUInt8(1) === 18 ? multipartReply(m.readUInt32BE(4), Buffer.alloc(3), false) : undefined,
  );
  await t.rejects(readMeters(garbled.socket, 2000), { code: 'OVS_FAILED', message: /malformed meter reply: 3 bytes left/ });
  await t.rejects(readMeters('/nonexistent/ovsnet/br.mgmt', 2000), /cannot reach ovs-vswitchd/);
});

t.test('meter replies generated or mutated: a map or OVS_FAILED, never another error', async (t) => {
  const valid = Buffer.concat([
    meterConfig(13, 0x0f5d0002, [[1, 1000, 1000, 0]]),
    meterConfig(2, 9, [
      [2, 5, 7, 1],
      [1, 3, 4, 0],
    ]),
  ]);
  const mutated = fc
    .tuple(fc.array(fc.tuple(fc.nat(valid.length - 1), fc.integer({ min: 0, max: 255 })), { maxLength: 6 }), fc.nat(valid.length))
    .map(([edits, cut]) => {
      const b = Buffer.from(valid.subarray(0, cut));
      for (const [at, byte] of edits) if (at < b.length) b[at] = byte;
      return b;
    });
  const body = fc.oneof(
    mutated,
    fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a)),
  );
  let refused = 0;
  fc.assert(
    fc.property(body, (b) => {
      try {
        const meters = parseMeterConfigs(b);
        return meters.size <= b.length / 8;
      } catch (err) {
        refused++;
        return (err as { code?: string }).code === 'OVS_FAILED';
      }
    }),
    { numRuns: 3000 },
  );
  t.ok(refused > 0, `${refused} of 3,000 refused, the rest read`);
});

t.test("readGroupIds: the groups' IDs from GROUP_DESC in parts; lengths that do not add up are refused", async (t) => {
  const r = groupDescRequest(2);
  t.same([r.readUInt8(1), r.readUInt16BE(2), r.readUInt16BE(8)], [18, 16, 7], 'MULTIPART_REQUEST of GROUP_DESC, no body');
  t.same(parseGroupIds(Buffer.concat([groupDesc(0x0f610002, 40), groupDesc(9)])), [0x0f610002, 9]);
  t.throws(() => parseGroupIds(groupDesc(5, 40).subarray(0, 20)), {
    code: 'OVS_FAILED',
    message: /malformed group reply: a group of 48 bytes at 0 of 20/,
  });
  t.throws(() => parseGroupIds(Buffer.alloc(4)), /4 bytes left/);
  const sw = await fakeSwitch(t, (m) =>
    m.readUInt8(1) === 18 && m.readUInt16BE(8) === 7
      ? Buffer.concat([
          multipartReply(m.readUInt32BE(4), groupDesc(0x0f610002, 16), true, 7),
          multipartReply(m.readUInt32BE(4), groupDesc(9), false, 7),
        ])
      : undefined,
  );
  t.same(await readGroupIds(sw.socket, 2000), [0x0f610002, 9], 'both parts');
  const refusing = await fakeSwitch(t, (m) => (m.readUInt8(1) === 18 ? msg(1, m.readUInt32BE(4), 12) : undefined));
  await t.rejects(readGroupIds(refusing.socket, 2000), /refused the OpenFlow 1\.3 connection/);
  const noCommonVersion = await fakeSwitch(t, (m) => (m.readUInt8(1) === 0 ? msg(1, m.readUInt32BE(4), 12) : undefined));
  await t.rejects(readGroupIds(noCommonVersion.socket, 2000), /refused the OpenFlow 1\.3 connection/, 'an error to the HELLO');
  const silent = await fakeSwitch(t, () => undefined);
  await t.rejects(readGroupIds(silent.socket, 200), /did not answer the group read within 200 ms/);
});
