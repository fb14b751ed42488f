/**
 * Meters over OpenFlow (src/driver/ovs/of-meters.ts): the METER_MOD bytes OpenFlow 1.3 defines,
 * one connection carrying every mod and a barrier, and a refusal naming the meter. Against a
 * server of the test's own on a unix socket; the real switch is in test/e2e/restarts.test.ts.
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { meterModMessage, sendMeterMods } from '../../../src/driver/ovs/of-meters.js';
import { splitMessages } from '../../../src/driver/ovs/of-watch.js';
import { meterSpec } from '../../../src/driver/ovs/qos-flows.js';

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

/** A switch of the test's own: answers each message with `reply(message)` (none: undefined). */
async function fakeSwitch(t: Test, reply: (m: Buffer) => Buffer | undefined): Promise<{ socket: string; seen: Buffer[] }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ofm-'));
  const socket = path.join(dir, 'br.mgmt');
  const seen: Buffer[] = [];
  const server = net.createServer((c) => {
    let buffered: Buffer = Buffer.alloc(0);
    c.on('data', (chunk: Buffer) => {
      const split = splitMessages(Buffer.concat([buffered, chunk]));
      buffered = split.rest;
      for (const m of split.messages) {
        seen.push(m);
        const r = reply(m);
        if (r !== undefined) c.write(r);
      }
    });
    c.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(socket, r));
  t.teardown(() => {
    server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { socket, seen };
}

const msg = (type: number, xid: number, length = 8) => {
  const b = Buffer.alloc(length);
  b.writeUInt8(4, 0);
  b.writeUInt8(type, 1);
  b.writeUInt16BE(length, 2);
  b.writeUInt32BE(xid, 4);
  return b;
};

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
