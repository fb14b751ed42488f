/**
 * The read-only Engine client against a fake Engine on a unix socket: answers, 404, garbage, a
 * body over the limit, a silent server, the events stream (garbage lines, an over-long line, an
 * end and the reconnect, close()), and what stands at the socket's path: a regular file and a
 * FIFO fail at once, a symbolic link to a socket is followed (the path is the admin's setting).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { Engine, ENGINE_LIMITS, EngineError, networkVerbose } from '../../../src/driver/vip/engine.js';

const alive = setInterval(() => undefined, 1000);
t.teardown(() => clearInterval(alive));

const NET = 'q'.repeat(25);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-engine-'));
const socket = path.join(dir, 'docker.sock');
let handler: http.RequestListener = (_req, res) => res.end('{}');
const seen: string[] = [];
const server = http.createServer((req, res) => {
  seen.push(`${req.method ?? ''} ${req.url ?? ''}`);
  handler(req, res);
});
await new Promise<void>((r) => server.listen(socket, r));
t.teardown(() => {
  server.closeAllConnections();
  server.close();
  fs.rmSync(dir, { recursive: true, force: true });
});
const limits = { ...ENGINE_LIMITS, timeoutMs: 500, maxBodyBytes: 1024, maxLineBytes: 256, backoffFirstMs: 20, backoffMaxMs: 80 };
const engine = new Engine(socket, limits);

t.test('paths are built here: network IDs of Docker and swarmkit only', async (t) => {
  t.equal(networkVerbose(NET), `/networks/${NET}?verbose=true`);
  t.equal(networkVerbose('a'.repeat(64)), `/networks/${'a'.repeat(64)}?verbose=true`);
  for (const bad of ['../plugins', 'Q'.repeat(25), 'a'.repeat(63), `${NET}/x`, `${NET}?a=b`])
    t.throws(() => networkVerbose(bad), EngineError);
});

t.test('GET: the JSON of a 200, a 404 with its status, garbage named by its path', async (t) => {
  handler = (_req, res) => res.end(JSON.stringify({ Services: {} }));
  t.same(await engine.get(networkVerbose(NET)), { Services: {} });
  t.equal(seen.at(-1), `GET /networks/${NET}?verbose=true`, 'a GET, nothing else');
  handler = (_req, res) => res.writeHead(404).end('{"message":"network not found"}');
  await t.rejects(engine.get(networkVerbose(NET)), { status: 404, message: /answered status 404/ });
  handler = (_req, res) => res.end('{"Services": ');
  await t.rejects(engine.get(networkVerbose(NET)), {
    status: 200,
    message: new RegExp(`GET /networks/${NET}\\?verbose=true: the answer is not JSON`),
  });
});

t.test('a body over the limit: the request is destroyed and the error says the limit', async (t) => {
  let closed = false;
  handler = (_req, res) => {
    res.on('close', () => (closed = true));
    res.write('['.padEnd(800, ' '));
    res.write(''.padEnd(800, ' '));
    // never ends: only the limit stops it
  };
  await t.rejects(engine.get(networkVerbose(NET)), { message: /exceeds the limit of 1 KiB; the request was dropped/ });
  await new Promise((r) => setTimeout(r, 50));
  t.ok(closed, 'the connection was closed');
});

t.test('a server that accepts and never answers: the bound fails it', async (t) => {
  handler = () => undefined;
  const start = Date.now();
  await t.rejects(engine.get(networkVerbose(NET)), { message: /no whole answer within 500 ms/ });
  t.ok(Date.now() - start < 2000, `${Date.now() - start} ms`);
  const real = new Engine(socket);
  const t0 = Date.now();
  await t.rejects(real.get(networkVerbose(NET)), { message: /within 3000 ms/ });
  t.ok(Date.now() - t0 < 10_000, `the default bound: ${Date.now() - t0} ms`);
});

t.test('what stands at the path: a regular file or a FIFO fails at once, a symlink to a socket is followed', async (t) => {
  const file = path.join(dir, 'file');
  fs.writeFileSync(file, 'x');
  const fifo = path.join(dir, 'fifo');
  execFileSync('mkfifo', [fifo]);
  for (const p of [file, fifo, path.join(dir, 'missing')]) {
    const start = Date.now();
    await t.rejects(new Engine(p, limits).get(networkVerbose(NET)), { message: /ECONNREFUSED|ENOTSOCK|ENOENT/ });
    t.ok(Date.now() - start < 400, `${path.basename(p)}: failed in ${Date.now() - start} ms, before the timeout`);
  }
  const link = path.join(dir, 'link.sock');
  fs.symlinkSync(socket, link);
  handler = (_req, res) => res.end('{"ok":true}');
  t.same(await new Engine(link, limits).get(networkVerbose(NET)), { ok: true });
});

/** Collects what an events subscription reports until `until` holds. */
async function follow(until: (r: { events: unknown[]; opens: number; drops: string[] }) => boolean) {
  const r = { events: [] as unknown[], opens: 0, drops: [] as string[] };
  const sub = engine.events(
    { type: ['network', 'service', 'container'] },
    { onEvent: (e) => r.events.push(e), onOpen: () => r.opens++, onDrop: (err) => r.drops.push(err?.message ?? 'ended') },
  );
  const start = Date.now();
  while (!until(r) && Date.now() - start < 5000) await new Promise((res) => setTimeout(res, 10));
  sub.close();
  return r;
}

t.test('events: the filter in the query, garbage lines dropped, objects delivered', async (t) => {
  let url = '';
  handler = (req, res) => {
    url = req.url ?? '';
    res.write('{"Type":"network","Action":"create"}\n');
    res.write('garbage\n[1,2]\n\n"x"\n{"Type":"ser');
    res.write('vice","Action":"update"}\n');
  };
  const r = await follow((r) => r.events.length >= 2);
  t.equal(decodeURIComponent(url), '/events?filters={"type":["network","service","container"]}');
  t.same(r.events, [
    { Type: 'network', Action: 'create' },
    { Type: 'service', Action: 'update' },
  ]);
  t.equal(r.opens, 1);
});

t.test('events: an over-long line drops the connection; it reconnects', async (t) => {
  let connections = 0;
  handler = (_req, res) => {
    connections++;
    res.write(`{"Type":"network","x":"${'a'.repeat(300)}"}\n`);
  };
  const r = await follow((r) => r.drops.length >= 2);
  t.match(r.drops[0], /a line exceeds the limit of 256 bytes; the stream was dropped/);
  t.ok(connections >= 2, `${connections} connections`);
  t.same(r.events, []);
});

t.test('events: a stream that ends is reconnected, with backoff; close() stops it', async (t) => {
  const at: number[] = [];
  handler = (_req, res) => {
    at.push(Date.now());
    res.end();
  };
  const r = await follow((r) => r.drops.length >= 4);
  t.ok(r.opens >= 4);
  const gaps = at.slice(1).map((x, i) => x - (at[i] ?? 0));
  t.ok((gaps[0] ?? 0) >= 15 && (gaps[2] ?? 0) >= 60, `waits grow: ${gaps.join(', ')} ms`);
  const before = at.length;
  await new Promise((res) => setTimeout(res, 250));
  t.equal(at.length, before, 'nothing after close()');
});

t.test('events: a status other than 200 is a drop, and retried', async (t) => {
  handler = (_req, res) => res.writeHead(500).end('{}');
  const r = await follow((r) => r.drops.length >= 2);
  t.match(r.drops[0], /answered status 500/);
  t.equal(r.opens, 0);
});
