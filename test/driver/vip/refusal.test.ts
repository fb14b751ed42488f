/**
 * Refusing a connection to a VIP without tasks (pure): the PACKET_IN read, the ICMP port
 * unreachable built (checksums, quoted header), the PACKET_OUT in OpenFlow 1.3 and 1.5, and what
 * gets no answer: another cookie, an ICMP error, a later fragment, malformed messages, a flood
 * beyond the rate.
 */
import fc from 'fast-check';
import t from 'tap';
import { OFPP_CONTROLLER, OFPP_TABLE, packetOut } from '../../../src/driver/ovs/packet-out.js';
import { isVipCookie, parsePacketIn, portUnreachable, REFUSALS_PER_SECOND, VipRefusals } from '../../../src/driver/vip/refusal.js';

const CLIENT_MAC = '0242 0a5a 0009'.replace(/ /g, '');
const VIP_MAC = '0242 0a5a 0014'.replace(/ /g, '');

function sum(b: Buffer): number {
  let s = 0;
  for (let i = 0; i + 1 < b.length; i += 2) s += b.readUInt16BE(i);
  if (b.length % 2) s += (b[b.length - 1] ?? 0) << 8;
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  return s;
}

/** A TCP SYN from 10.90.0.9:40000 to 10.90.0.20:80. */
function syn(protocol = 6, fragment = 0, icmpType = 8): Buffer {
  const ip = Buffer.alloc(40);
  ip.writeUInt8(0x45, 0);
  ip.writeUInt16BE(40, 2);
  ip.writeUInt16BE(fragment, 6);
  ip.writeUInt8(64, 8);
  ip.writeUInt8(protocol, 9);
  Buffer.from([10, 90, 0, 9]).copy(ip, 12);
  Buffer.from([10, 90, 0, 20]).copy(ip, 16);
  ip.writeUInt16BE(40000, 20);
  ip.writeUInt16BE(80, 22);
  if (protocol === 1) ip.writeUInt8(icmpType, 20);
  return Buffer.concat([Buffer.from(VIP_MAC + CLIENT_MAC + '0800', 'hex'), ip]);
}

/** A PACKET_IN as OVS sends it (OpenFlow 1.5 layout, the same as 1.3's). */
function packetIn(frame: Buffer, cookie = 0x0f61000000000005n, inPort = 3, version = 6): Buffer {
  const match = Buffer.alloc(16);
  match.writeUInt16BE(1, 0);
  match.writeUInt16BE(12, 2);
  match.writeUInt32BE(0x80000004, 4);
  match.writeUInt32BE(inPort, 8);
  const head = Buffer.alloc(24);
  head.writeUInt8(version, 0);
  head.writeUInt8(10, 1);
  head.writeUInt32BE(0xffffffff, 8);
  head.writeUInt16BE(frame.length, 12);
  head.writeUInt8(1, 14);
  head.writeUInt8(51, 15);
  head.writeBigUInt64BE(cookie, 16);
  const m = Buffer.concat([head, match, Buffer.alloc(2), frame]);
  m.writeUInt16BE(m.length, 2);
  return m;
}

t.test('parsePacketIn: cookie, in_port and the frame', async (t) => {
  const frame = syn();
  const p = parsePacketIn(packetIn(frame));
  t.equal(p?.cookie, 0x0f61000000000005n);
  t.equal(p?.inPort, 3);
  t.same(p?.data, frame);
  t.ok(isVipCookie(p?.cookie ?? 0n));
  t.notOk(isVipCookie(0x0f60000000000005n));
});

t.test('portUnreachable: from the VIP to the client, ICMP 3/3 quoting the header and 8 bytes, checksums right', async (t) => {
  const reply = portUnreachable(syn());
  if (reply === undefined) throw new Error('no reply');
  t.equal(reply.subarray(0, 6).toString('hex'), CLIENT_MAC, 'to the client');
  t.equal(reply.subarray(6, 12).toString('hex'), VIP_MAC, 'from the VIP MAC');
  const ip = reply.subarray(14, 34);
  t.same([...ip.subarray(12, 16)], [10, 90, 0, 20], 'from the VIP');
  t.same([...ip.subarray(16, 20)], [10, 90, 0, 9]);
  t.equal(sum(ip), 0xffff, 'IPv4 header checksum');
  const icmp = reply.subarray(34);
  t.same([icmp[0], icmp[1]], [3, 3]);
  t.equal(sum(icmp), 0xffff, 'ICMP checksum');
  t.equal(icmp.length, 8 + 28, 'the quoted header and 8 bytes');
});

t.test('no answer to an ICMP error, a later fragment, not IPv4, or a short frame', async (t) => {
  t.equal(portUnreachable(syn(1, 0, 3)), undefined, 'an ICMP error');
  t.not(portUnreachable(syn(1, 0, 8)), undefined, 'an echo request is answered');
  t.equal(portUnreachable(syn(6, 5)), undefined, 'a later fragment');
  const v6 = Buffer.from(syn());
  v6.writeUInt16BE(0x86dd, 12);
  t.equal(portUnreachable(v6), undefined);
  t.equal(portUnreachable(Buffer.alloc(20)), undefined);
});

t.test('packetOut: the frame out of the port, OpenFlow 1.3 and 1.5 layouts', async (t) => {
  const frame = Buffer.from('abcd', 'hex');
  const m13 = packetOut(4, 9, frame, { inPort: OFPP_CONTROLLER, output: 3 });
  t.equal(m13.readUInt16BE(2), m13.length);
  t.equal(m13.readUInt32BE(12), 0xfffffffd, 'in_port CONTROLLER');
  t.equal(m13.readUInt32BE(28), 3, 'output:3');
  t.same(m13.subarray(-2), frame);
  const m15 = packetOut(6, 9, frame, { inPort: OFPP_CONTROLLER, output: 3 });
  t.equal(m15.readUInt16BE(12), 16, 'actions length');
  t.equal(m15.readUInt32BE(20), 0x80000004, 'in_port as an OXM');
  t.equal(m15.readUInt32BE(24), 0xfffffffd, 'in_port CONTROLLER');
  t.equal(m15.readUInt32BE(36), 3, 'output:3');
  t.same(m15.subarray(-2), frame);
  // An endpoint's announcement: in by its port, through the tables (OpenFlow 1.4 as 1.3).
  const m14 = packetOut(5, 10, frame, { inPort: 7, output: OFPP_TABLE });
  t.equal(m14.readUInt8(0), 5);
  t.equal(m14.readUInt32BE(4), 10, 'xid');
  t.equal(m14.readUInt32BE(12), 7, 'in_port 7');
  t.equal(m14.readUInt32BE(28), 0xfffffff9, 'output:TABLE');
  t.equal(packetOut(6, 1, frame, { inPort: 7, output: OFPP_TABLE }).readUInt32BE(24), 7, 'in_port 7 as an OXM');
});

t.test('VipRefusals: answers VIP packet-ins only, within the rate; malformed messages never throw', async (t) => {
  let now = 1000;
  const r = new VipRefusals(() => now);
  t.equal(r.answer(packetIn(syn(), 0x0f60000000000005n)), undefined, 'another cookie');
  for (let i = 0; i < REFUSALS_PER_SECOND; i++) t.not(r.answer(packetIn(syn())), undefined);
  t.equal(r.answer(packetIn(syn())), undefined, 'over the rate');
  now += 1000;
  t.not(r.answer(packetIn(syn())), undefined, 'the next second');
  // Hostile or broken messages on the OpenFlow connection: any bytes after a PACKET_IN header,
  // and real PACKET_INs carrying any frame. Never a throw; only ever a PACKET_OUT back.
  fc.assert(
    fc.property(fc.integer({ min: 4, max: 6 }), fc.uint8Array({ maxLength: 300 }), (version, bytes) => {
      const m = Buffer.concat([Buffer.from([version, 10, 0, 0]), Buffer.from(bytes)]);
      m.writeUInt16BE(Math.min(m.length, 0xffff), 2);
      const a = new VipRefusals().answer(m);
      return a === undefined || a.readUInt8(1) === 13;
    }),
    { numRuns: 3000, seed: 26 },
  );
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 1600 }), (frame) => {
      const a = new VipRefusals().answer(packetIn(Buffer.from(frame)));
      return a === undefined || (a.readUInt8(1) === 13 && a.length <= 24 + 16 + 14 + 20 + 8 + 60 + 8);
    }),
    { numRuns: 3000, seed: 27 },
  );
  t.pass('6000 generated messages: none threw, every answer a PACKET_OUT of bounded size');
});
