/**
 * A switch of a test's own on a unix socket, for the OpenFlow clients (src/driver/ovs/of-watch.ts,
 * of-requests.ts), and the OpenFlow 1.3 messages it answers with.
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { splitMessages } from '../../src/driver/ovs/of-watch.js';

/** A switch of the test's own: answers each message with `reply(message)` (none: undefined). */
export async function fakeSwitch(t: Test, reply: (m: Buffer) => Buffer | undefined): Promise<{ socket: string; seen: Buffer[] }> {
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

export const msg = (type: number, xid: number, length = 8) => {
  const b = Buffer.alloc(length);
  b.writeUInt8(4, 0);
  b.writeUInt8(type, 1);
  b.writeUInt16BE(length, 2);
  b.writeUInt32BE(xid, 4);
  return b;
};

/** One ofp_meter_config: its flags, ID and bands ([type, rate, burst, prec_level]). */
export function meterConfig(flags: number, id: number, bands: readonly (readonly [number, number, number, number])[]): Buffer {
  const b = Buffer.alloc(8 + 16 * bands.length);
  b.writeUInt16BE(b.length, 0);
  b.writeUInt16BE(flags, 2);
  b.writeUInt32BE(id, 4);
  bands.forEach(([type, rate, burst, prec], i) => {
    const at = 8 + 16 * i;
    b.writeUInt16BE(type, at);
    b.writeUInt16BE(16, at + 2);
    b.writeUInt32BE(rate, at + 4);
    b.writeUInt32BE(burst, at + 8);
    b.writeUInt8(prec, at + 12);
  });
  return b;
}

/** A multipart reply of `type` (10: METER_CONFIG, 7: GROUP_DESC) to `xid` carrying `body`; `more`: another follows. */
export function multipartReply(xid: number, body: Buffer, more: boolean, type = 10): Buffer {
  const head = msg(19, xid, 16);
  head.writeUInt16BE(16 + body.length, 2);
  head.writeUInt16BE(type, 8);
  head.writeUInt16BE(more ? 1 : 0, 10);
  return Buffer.concat([head, body]);
}

/** One ofp_group_desc of OpenFlow 1.3 with `buckets` bytes of buckets after its 8-byte head. */
export function groupDesc(id: number, buckets = 0): Buffer {
  const b = Buffer.alloc(8 + buckets);
  b.writeUInt16BE(b.length, 0);
  b.writeUInt32BE(id, 4);
  return b;
}
