/**
 * The CNI socket's bounds (server.ts, CNI_SOCKET_LIMITS, made small here): connections beyond
 * the cap are closed at once, an idle connection is closed after the idle time, a command in
 * flight longer than that is not cut, and once idle connections are gone the daemon answers.
 */
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { CNI_SOCKET_LIMITS, buildCniServer } from '../../src/cni/server.js';
import type { CniService } from '../../src/cni/service.js';
import { createLogger } from '../../src/lib/log.js';
import { listenOnSocket, removeSocket } from '../../src/plugin-api/listen.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-cni-limits-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

/** One STATUS command over the socket; its answer's text. */
function status(socket: string): Promise<string> {
  const body = JSON.stringify({ rpcVersion: '1', command: 'STATUS', config: JSON.stringify({ cniVersion: '1.1.0', network: 'n' }) });
  return new Promise((resolve, reject) => {
    const req = http.request(
      { socketPath: socket, path: '/cni', method: 'POST', headers: { 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve(text));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const idle = (socket: string) =>
  new Promise<net.Socket>((resolve, reject) => {
    const c = net.connect(socket, () => resolve(c));
    c.once('error', reject);
  });
const closedWithin = (c: net.Socket, ms: number) =>
  new Promise<boolean>((resolve) => {
    if (c.destroyed) return resolve(true);
    c.once('close', () => resolve(true));
    setTimeout(() => resolve(false), ms);
  });

t.test('a cap on connections, idle ones closed, a long command not cut', async (t) => {
  t.ok(CNI_SOCKET_LIMITS.maxConnections >= 16 && CNI_SOCKET_LIMITS.idleTimeoutMs <= 30_000, 'the defaults are bounded');
  let slowMs = 0;
  const service = {
    handle: async () => {
      await new Promise((r) => setTimeout(r, slowMs));
      return undefined;
    },
  } as unknown as CniService;
  const app = buildCniServer(service, createLogger('silent'), { maxConnections: 3, idleTimeoutMs: 300 });
  const socket = path.join(dir, 'limits.cni');
  await listenOnSocket(app, socket);
  t.teardown(async () => {
    await app.close();
    removeSocket(socket);
  });
  t.equal(await status(socket), '{"rpcVersion":"1"}', 'answers');

  const held = await Promise.all([1, 2, 3].map(() => idle(socket)));
  t.teardown(() => held.forEach((c) => c.destroy()));
  const fourth = net.connect(socket);
  fourth.on('error', () => undefined);
  t.ok(await closedWithin(fourth, 250), 'a connection beyond the cap (N+1) is closed at once');
  const t0 = Date.now();
  const closed = await Promise.all(held.map((c) => closedWithin(c, 3000)));
  t.same(closed, [true, true, true], `the idle connections closed after ${Date.now() - t0} ms`);
  t.equal(await status(socket), '{"rpcVersion":"1"}', 'and the daemon answers again');

  slowMs = 900; // three idle times: a command in flight is not idle
  t.equal(await status(socket), '{"rpcVersion":"1"}', 'a command longer than the idle time is answered');
});
