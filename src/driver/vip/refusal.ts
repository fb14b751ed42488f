/**
 * A new connection to a VIP whose service has no task is refused, not left to time out: its first
 * packet reaches ovsnet as an OpenFlow PACKET_IN (vip/flows.ts's `controller` action, under a VIP
 * cookie), and ovsnet sends back, out of the port it came in by, an ICMP port unreachable from the
 * VIP (a TCP client's connect() then fails with "connection refused" at once, a UDP client's next
 * call too). Pure: the PACKET_IN parsed, the ICMP packet and the PACKET_OUT built. Anything that is
 * not a VIP cookie's IPv4 packet over Ethernet, an ICMP error itself or a later fragment gets no
 * answer (never an answer to an answer).
 */
import { internetChecksum } from '../../lib/checksum.js';
import { FEATURE } from '../ovs/cookies.js';
import { OF15, OFPP_CONTROLLER, OXM_IN_PORT, packetOut } from '../ovs/packet-out.js';

const OFPT_PACKET_IN = 10;

export interface PacketIn {
  readonly cookie: bigint;
  readonly inPort: number;
  readonly data: Buffer;
}

/** An OpenFlow 1.3-1.5 PACKET_IN: its cookie, in_port and frame; undefined for anything else or a malformed one. */
export function parsePacketIn(message: Buffer): PacketIn | undefined {
  const version = message.readUInt8(0);
  if (version < 0x04 || version > OF15 || message.readUInt8(1) !== OFPT_PACKET_IN || message.length < 32) return undefined;
  const cookie = message.readBigUInt64BE(16);
  const matchLength = message.readUInt16BE(26); // after buffer_id(4) total_len(2) reason(1) table_id(1) cookie(8)
  if (message.readUInt16BE(24) !== 1 || matchLength < 4) return undefined; // OFPMT_OXM
  const matchEnd = 24 + matchLength;
  let inPort: number | undefined;
  for (let at = 28; at + 4 <= matchEnd && at + 4 <= message.length; ) {
    const header = message.readUInt32BE(at);
    const length = header & 0xff;
    if (header === OXM_IN_PORT && at + 8 <= message.length) inPort = message.readUInt32BE(at + 4);
    at += 4 + length;
  }
  const dataAt = 24 + Math.ceil(matchLength / 8) * 8 + 2;
  if (inPort === undefined || dataAt > message.length) return undefined;
  return { cookie, inPort, data: message.subarray(dataAt) };
}

export const isVipCookie = (cookie: bigint): boolean => cookie >> 48n === FEATURE.vip;

/**
 * The ICMP port unreachable answering `frame` (Ethernet, IPv4), from its destination to its
 * source; undefined when the frame gets none (see the header).
 */
export function portUnreachable(frame: Buffer): Buffer | undefined {
  if (frame.length < 14 + 20 || frame.readUInt16BE(12) !== 0x0800) return undefined;
  const ip = frame.subarray(14);
  const ihl = (ip.readUInt8(0) & 0x0f) * 4;
  if (ip.readUInt8(0) >> 4 !== 4 || ihl < 20 || ip.length < ihl) return undefined;
  if ((ip.readUInt16BE(6) & 0x1fff) !== 0) return undefined; // a later fragment
  const protocol = ip.readUInt8(9);
  if (protocol === 1 && ip.length > ihl && ip.readUInt8(ihl) !== 8) return undefined; // ICMP other than echo request
  const quoted = ip.subarray(0, Math.min(ip.length, ihl + 8));
  const icmp = Buffer.alloc(8 + quoted.length);
  icmp.writeUInt8(3, 0); // destination unreachable
  icmp.writeUInt8(3, 1); // port unreachable
  quoted.copy(icmp, 8);
  icmp.writeUInt16BE(internetChecksum(icmp), 2);
  const header = Buffer.alloc(20);
  header.writeUInt8(0x45, 0);
  header.writeUInt8(0xc0, 1);
  header.writeUInt16BE(20 + icmp.length, 2);
  header.writeUInt8(64, 8);
  header.writeUInt8(1, 9);
  ip.copy(header, 12, 16, 20); // source: the VIP, the packet's destination
  ip.copy(header, 16, 12, 16); // destination: the packet's source
  header.writeUInt16BE(internetChecksum(header), 10);
  const ethernet = Buffer.alloc(14);
  frame.copy(ethernet, 0, 6, 12);
  frame.copy(ethernet, 6, 0, 6);
  ethernet.writeUInt16BE(0x0800, 12);
  return Buffer.concat([ethernet, header, icmp]);
}

/** At most this many refusals a second: a flood of connections to a VIP without tasks costs bounded work. */
export const REFUSALS_PER_SECOND = 200;

/**
 * The answer to an OpenFlow message on the watch connection (of-watch.ts): a PACKET_OUT with the
 * refusal for a VIP's PACKET_IN, within the rate; undefined for anything else.
 */
export class VipRefusals {
  private windowStart = 0;
  private inWindow = 0;
  private xid = 0x0f610000;
  refused = 0;

  constructor(private readonly now: () => number = Date.now) {}

  answer(message: Buffer): Buffer | undefined {
    const packet = parsePacketIn(message);
    if (packet === undefined || !isVipCookie(packet.cookie)) return undefined;
    const t = this.now();
    if (t - this.windowStart >= 1000) {
      this.windowStart = t;
      this.inWindow = 0;
    }
    if (this.inWindow >= REFUSALS_PER_SECOND) return undefined;
    const reply = portUnreachable(packet.data);
    if (reply === undefined) return undefined;
    this.inWindow += 1;
    this.refused += 1;
    this.xid = (this.xid + 1) >>> 0;
    return packetOut(message.readUInt8(0), this.xid, reply, { inPort: OFPP_CONTROLLER, output: packet.inPort });
  }
}
