/**
 * OpenFlow PACKET_OUT, as ovsnet sends it on its connection to the bridge (of-watch.ts): a frame
 * given to the switch as if it came in by `inPort`, sent to one `output` port. Two uses: a VIP's
 * refusal (vip/refusal.ts: from the controller, out of the client's port) and an endpoint's
 * announcement (endpoint/announce.ts: from the endpoint's port, through the flow tables). Pure.
 */

/** The controller as an ingress port: a frame the switch did not receive. */
export const OFPP_CONTROLLER = 0xfffffffd;
/** As an output: the switch's flow tables, from table 0, as if the frame came in by the in_port. */
export const OFPP_TABLE = 0xfffffff9;
/** The lowest OpenFlow version (wire number) whose PACKET_OUT packetOut builds: 1.3. */
export const PACKET_OUT_MIN_VERSION = 0x04;

const OFPT_PACKET_OUT = 13;
const OFP_NO_BUFFER = 0xffffffff;
/** The OXM header of in_port: OFPXMC_OPENFLOW_BASIC, OFPXMT_OFB_IN_PORT, length 4. */
export const OXM_IN_PORT = 0x80000004;
/** OpenFlow 1.5's wire number, the highest ovsnet speaks. */
export const OF15 = 0x06;

export interface PacketOutPorts {
  /** The port the switch takes the frame to have come in by (OFPP_CONTROLLER, or a port's number). */
  readonly inPort: number;
  /** Where it goes: a port's number, or OFPP_TABLE. */
  readonly output: number;
}

/** A PACKET_OUT of `frame` in the connection's OpenFlow version (1.3 to 1.5). */
export function packetOut(version: number, xid: number, frame: Buffer, ports: PacketOutPorts): Buffer {
  const output = Buffer.alloc(16); // OFPAT_OUTPUT: type 0, length 16, port, max_len, pad
  output.writeUInt16BE(16, 2);
  output.writeUInt32BE(ports.output >>> 0, 4);
  output.writeUInt16BE(0xffff, 8);
  let head: Buffer;
  if (version >= OF15) {
    // buffer_id, actions_len, pad(2), then an OXM match carrying in_port (padded to 8).
    head = Buffer.alloc(8 + 8 + 16);
    head.writeUInt32BE(OFP_NO_BUFFER, 8);
    head.writeUInt16BE(output.length, 12);
    head.writeUInt16BE(1, 16); // OFPMT_OXM
    head.writeUInt16BE(4 + 8, 18);
    head.writeUInt32BE(OXM_IN_PORT, 20);
    head.writeUInt32BE(ports.inPort >>> 0, 24);
  } else {
    head = Buffer.alloc(8 + 16);
    head.writeUInt32BE(OFP_NO_BUFFER, 8);
    head.writeUInt32BE(ports.inPort >>> 0, 12);
    head.writeUInt16BE(output.length, 16);
  }
  const message = Buffer.concat([head, output, frame]);
  message.writeUInt8(version, 0);
  message.writeUInt8(OFPT_PACKET_OUT, 1);
  message.writeUInt16BE(message.length, 2);
  message.writeUInt32BE(xid >>> 0, 4);
  return message;
}
