/**
 * Child of rss-floor.ts: its RSS bare; then serving a bare Fastify server on a unix socket
 * (no logger, one route) that has answered 200 Join-shaped calls: the server the design keeps;
 * then with ovsnet's daemon modules loaded too (not started; the embedded store's, since etcd's
 * client loads only with etcd); then with one idle worker thread under the link worker's
 * limits. Each with its file-backed part, printed as one JSON line. Each step's RSS is taken
 * after three full collections (--expose-gc) 200 ms apart.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { LINK_WORKER_LIMITS } from '../src/driver/links/links.js';
import { requirePackage } from '../src/lib/packages.js';

/** RSS and its file-backed part (RssFile: the node binary's pages), MiB, read here: importing bench/storm.ts would load more. */
const settle = async (): Promise<{ rss: number; file: number }> => {
  for (let i = 0; i < 3; i++) {
    (globalThis as { gc?: () => void }).gc?.();
    await new Promise((r) => setTimeout(r, 200));
  }
  const status = fs.readFileSync('/proc/self/status', 'utf8');
  return { rss: process.memoryUsage().rss / 1048576, file: Number(/RssFile:\s+(\d+) kB/.exec(status)?.[1]) / 1024 };
};

/** POSTs a Join-shaped body on `socket` and reads the answer. */
const call = (socket: string) =>
  new Promise<void>((resolve, reject) => {
    const req = http.request({ socketPath: socket, path: '/NetworkDriver.Join', method: 'POST' }, (res) => {
      res.resume();
      res.on('end', resolve);
    });
    req.on('error', reject);
    req.setHeader('content-type', 'application/json');
    req.end(JSON.stringify({ NetworkID: 'a'.repeat(64), EndpointID: 'b'.repeat(64), SandboxKey: '/var/run/docker/netns/x', Options: {} }));
  });

const bare = await settle();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-rss-floor-'));
// After the bare figure, and as the daemon loads it (src/lib/packages.ts): with require().
const app = requirePackage('fastify').fastify({ logger: false });
app.post('/:method', (req, reply) => reply.send({ Err: '', got: req.body }));
try {
  const socket = path.join(dir, 'plugin.sock');
  await app.listen({ path: socket });
  for (let i = 0; i < 200; i++) await call(socket);
  const fastify = await settle();
  await import('../src/daemon/assemble.js');
  await import('../src/store/sqlite/sqlite.js');
  const modules = await settle();
  const worker = new Worker('setInterval(() => undefined, 1000)', { eval: true, resourceLimits: LINK_WORKER_LIMITS });
  await new Promise((r) => setTimeout(r, 500));
  const withWorker = await settle();
  await worker.terminate();
  console.log(JSON.stringify({ bare, fastify, modules, withWorker }));
} finally {
  await app.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
