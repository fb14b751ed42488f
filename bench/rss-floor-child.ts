/**
 * Child of rss-floor.ts: its RSS bare, then with ovsnet's daemon modules loaded (not started;
 * the embedded store's, since etcd's client loads only with etcd), then with one idle worker
 * thread under the link worker's limits, each with its file-backed part. Printed as one JSON line. Each step's RSS is taken
 * after three full collections (--expose-gc) 200 ms apart.
 */
import fs from 'node:fs';
import { Worker } from 'node:worker_threads';
import { LINK_WORKER_LIMITS } from '../src/driver/links/links.js';

/** RSS and its file-backed part (RssFile: the node binary's pages), MiB, read here: importing bench/storm.ts would load more. */
const settle = async (): Promise<{ rss: number; file: number }> => {
  for (let i = 0; i < 3; i++) {
    (globalThis as { gc?: () => void }).gc?.();
    await new Promise((r) => setTimeout(r, 200));
  }
  const status = fs.readFileSync('/proc/self/status', 'utf8');
  return { rss: process.memoryUsage().rss / 1048576, file: Number(/RssFile:\s+(\d+) kB/.exec(status)?.[1]) / 1024 };
};

const bare = await settle();
await import('../src/daemon/assemble.js');
await import('../src/store/sqlite/sqlite.js');
const modules = await settle();
const worker = new Worker('setInterval(() => undefined, 1000)', { eval: true, resourceLimits: LINK_WORKER_LIMITS });
await new Promise((r) => setTimeout(r, 500));
const withWorker = await settle();
await worker.terminate();
console.log(JSON.stringify({ bare, modules, withWorker }));
