/**
 * The OpenFlow connection that notices ovs-vswitchd going and coming back: its framing and
 * answers (pure), and OpenFlowWatch against a real unix socket server playing the bridge's
 * management socket (closing, answering again, asking for echoes, sending garbage).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { OpenFlowWatch, answerTo, helloMessage, splitMessages } from '../../../src/driver/ovs/of-watch.js';
import { waitFor } from '../../helpers/wait.js';

/** An OpenFlow message: version 4 (1.3), `type`, `xid`, `body`. */
function message(type: number, xid: number, body: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt8(4, 0);
  head.writeUInt8(type, 1);
  head.writeUInt16BE(8 + body.length, 2);
  head.writeUInt32BE(xid, 4);
  return Buffer.concat([head, body]);
}

t.test('helloMessage: OpenFlow 1.5 HELLO with a version bitmap of 1.0 to 1.5', async (t) => {
  t.equal(helloMessage(7).toString('hex'), '0600001000000007000100080000007e');
  t.equal(helloMessage(0x1_0000_0001).readUInt32BE(4), 1, 'the xid is 32 bits');
});

t.test('splitMessages: whole messages out, a partial one kept, a length under 8 is bad', async (t) => {
  const a = message(2, 1, Buffer.from('abc'));
  const b = message(0, 2);
  const c = message(3, 3, Buffer.from('0123456789'));
  const partial = splitMessages(c.subarray(0, 5));
  t.same(partial, { messages: [], rest: c.subarray(0, 5), bad: false }, 'less than a header: waits');
  const headerOnly = splitMessages(c.subarray(0, 12));
  t.same(headerOnly.messages, [], 'a header whose body has not all arrived: waits');
  t.equal(headerOnly.rest.length, 12);
  const several = splitMessages(Buffer.concat([a, b, c.subarray(0, 9)]));
  t.same(several.messages, [a, b], 'several in one chunk');
  t.same(several.rest, c.subarray(0, 9));
  t.notOk(several.bad);
  const done = splitMessages(Buffer.concat([several.rest, c.subarray(9)]));
  t.same(done, { messages: [c], rest: Buffer.alloc(0), bad: false }, 'the rest completed by the next chunk');
  const bad = Buffer.from(a);
  bad.writeUInt16BE(4, 2);
  t.match(splitMessages(Buffer.concat([b, bad])), { messages: [b], bad: true }, 'a length of 4 is not OpenFlow');
  t.ok(splitMessages(Buffer.from('0004000000000000', 'hex')).bad);
});

t.test('answerTo: an echo request gets its reply (type 3, same xid and body); nothing else is answered', async (t) => {
  const request = message(2, 0xdeadbeef, Buffer.from('ping body'));
  const reply = answerTo(request);
  t.ok(reply);
  t.equal(reply?.readUInt8(0), 4, 'the same version');
  t.equal(reply?.readUInt8(1), 3, 'OFPT_ECHO_REPLY');
  t.equal(reply?.readUInt32BE(4), 0xdeadbeef, 'the same xid');
  t.same(reply?.subarray(8), Buffer.from('ping body'), 'the same body');
  t.equal(request.readUInt8(1), 2, 'the request is left as it was');
  for (const type of [0, 1, 3, 5, 10]) t.equal(answerTo(message(type, 1)), undefined, `type ${type}`);
});

/** A unix socket server playing ovs-vswitchd's BRIDGE.mgmt: connections kept, what each sent. */
async function mgmtServer(t: Test, file: string) {
  const conns: { socket: net.Socket; data: Buffer[]; closed: boolean }[] = [];
  const server = net.createServer((socket) => {
    const conn = { socket, data: [] as Buffer[], closed: false };
    conns.push(conn);
    socket.on('data', (d: Buffer) => conn.data.push(d));
    socket.on('close', () => (conn.closed = true));
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(file, resolve));
  const close = async () => {
    for (const c of conns) c.socket.destroy();
    await new Promise((r) => server.close(r));
  };
  t.teardown(close);
  return { server, conns, close, received: (i: number) => Buffer.concat(conns[i]?.data ?? []) };
}

function tmp(t: Test): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-ofwatch-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function watcher(t: Test, socket: string) {
  const events: string[] = [];
  const watch = new OpenFlowWatch({ socket, onLost: () => events.push('lost'), onBack: () => events.push('back'), retryMs: 20 });
  t.teardown(() => watch.stop());
  return { watch, events };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('the first connect calls nothing; a closed connection is lost, the next accepted one is back', async (t) => {
  const file = path.join(tmp(t), 'br0.mgmt');
  const srv = await mgmtServer(t, file);
  const { watch, events } = watcher(t, file);
  watch.start();
  await waitFor(() => srv.received(0).length >= 16, 2000, 'the HELLO');
  t.same(srv.received(0).subarray(0, 16), helloMessage(1), 'HELLO first');
  t.ok(watch.connected);
  t.same(events, [], 'the first connect is no restart');
  srv.conns[0]?.socket.destroy(); // ovs-vswitchd exits
  await waitFor(() => events.length >= 2, 2000, 'lost, then back');
  t.same(events, ['lost', 'back']);
  t.equal(srv.conns.length, 2, 'dialled again');
  t.ok(watch.connected);
});

t.test('lost while the socket is gone, back once it is served again', async (t) => {
  const file = path.join(tmp(t), 'br0.mgmt');
  const srv = await mgmtServer(t, file);
  const { watch, events } = watcher(t, file);
  watch.start();
  await waitFor(() => watch.connected, 2000, 'connected');
  await srv.close(); // ovs-vswitchd gone: its socket closed (and removed)
  await waitFor(() => events.length === 1, 2000, 'lost');
  await sleep(100);
  t.same(events, ['lost'], 'nothing while nobody serves the socket');
  t.notOk(watch.connected);
  fs.rmSync(file, { force: true });
  const again = await mgmtServer(t, file);
  await waitFor(() => events.length === 2, 2000, 'back');
  t.same(events, ['lost', 'back']);
  t.equal(again.conns.length, 1);
});

t.test('an echo request gets an echo reply', async (t) => {
  const file = path.join(tmp(t), 'br0.mgmt');
  const srv = await mgmtServer(t, file);
  const { watch } = watcher(t, file);
  watch.start();
  await waitFor(() => srv.received(0).length >= 16, 2000, 'the HELLO');
  // Split across writes, as a stream may deliver it.
  const request = message(2, 99, Buffer.from('are you there'));
  srv.conns[0]?.socket.write(request.subarray(0, 5));
  await sleep(20);
  srv.conns[0]?.socket.write(request.subarray(5));
  await waitFor(() => srv.received(0).length >= 16 + request.length, 2000, 'the reply');
  const reply = srv.received(0).subarray(16);
  t.equal(reply.readUInt8(1), 3, 'OFPT_ECHO_REPLY');
  t.equal(reply.readUInt32BE(4), 99);
  t.same(reply.subarray(8), Buffer.from('are you there'));
});

t.test('a malformed message (length 4) drops the connection; it is dialled again', async (t) => {
  const file = path.join(tmp(t), 'br0.mgmt');
  const srv = await mgmtServer(t, file);
  const { watch, events } = watcher(t, file);
  watch.start();
  await waitFor(() => watch.connected, 2000, 'connected');
  srv.conns[0]?.socket.write(Buffer.from('0402000400000001', 'hex'));
  await waitFor(() => srv.conns[0]?.closed === true, 2000, 'the connection dropped');
  await waitFor(() => srv.conns.length === 2 && watch.connected, 2000, 'dialled again');
  t.same(events, ['lost', 'back']);
});

t.test('stop() ends the connection and the redialling', async (t) => {
  const file = path.join(tmp(t), 'br0.mgmt');
  const srv = await mgmtServer(t, file);
  const { watch, events } = watcher(t, file);
  watch.start();
  await waitFor(() => watch.connected, 2000, 'connected');
  watch.stop();
  await waitFor(() => srv.conns[0]?.closed === true, 2000, 'closed');
  await sleep(200);
  t.equal(srv.conns.length, 1, 'not dialled again');
  t.same(events, [], 'stopping is no loss');
  t.notOk(watch.connected);
});

t.test('a missing socket or a FIFO at its path: no callback, no crash; a socket served later is connected to', async (t) => {
  const dir = tmp(t);
  const missing = watcher(t, path.join(dir, 'nobr.mgmt'));
  missing.watch.start();
  const fifo = path.join(dir, 'fifo.mgmt');
  t.equal(spawnSync('mkfifo', [fifo]).status, 0, 'mkfifo');
  const notSocket = watcher(t, fifo);
  notSocket.watch.start();
  await sleep(300);
  t.same(missing.events, []);
  t.same(notSocket.events, []);
  t.notOk(missing.watch.connected);
  t.notOk(notSocket.watch.connected);
  const srv = await mgmtServer(t, path.join(dir, 'nobr.mgmt'));
  await waitFor(() => missing.watch.connected, 3000, 'connected once served (tried once a second meanwhile)');
  t.same(missing.events, [], 'a first connect, however late, is no restart');
  t.equal(srv.conns.length, 1);
});

t.test("send: nothing before the switch's HELLO or while down; after it, written whole in the version it settled", async (t) => {
  const file = path.join(tmp(t), 'br0.mgmt');
  const srv = await mgmtServer(t, file);
  const { watch } = watcher(t, file);
  const out = message(13, 5, Buffer.from('frame'));
  t.equal(watch.send([out]), false, 'not started: down');
  watch.start();
  await waitFor(() => srv.received(0).length >= 16, 2000, 'the HELLO');
  t.equal(watch.version, undefined, 'connected, but no HELLO from the switch yet');
  t.equal(watch.send([out]), false);
  const hello = message(0, 1); // version 4: the switch speaks at most OpenFlow 1.3
  srv.conns[0]?.socket.write(hello);
  await waitFor(() => watch.version !== undefined, 2000, 'the version');
  t.equal(watch.version, 4, 'OpenFlow 1.3, the highest both speak');
  t.equal(watch.send([out, out]), true);
  await waitFor(() => srv.received(0).length >= 16 + 2 * out.length, 2000, 'both messages');
  t.same(srv.received(0).subarray(16), Buffer.concat([out, out]));
  srv.conns[0]?.socket.destroy();
  await waitFor(() => srv.conns.length === 2, 2000, 'dialled again');
  t.equal(watch.version, undefined, 'a new connection: no version until its HELLO');
  t.equal(watch.send([out]), false);
});
