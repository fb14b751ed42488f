/**
 * Store benchmark: put, get and compare-and-swap transactions, one at a time, embedded vs etcd.
 * The baseline for the ratio column is the embedded store measured in the same run.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EtcdStore } from '../src/store/etcd/etcd.js';
import { SqliteStore } from '../src/store/sqlite/sqlite.js';
import { modRevisionIs, put, type Store } from '../src/store/types.js';
import { fmt, measure, table, type Summary } from './stats.js';

const N = Number(process.env.BENCH_N ?? 2000);

/** A Summary with this process's CPU per operation (user + system, µs) over its run. */
type Measured = Summary & { readonly cpuUs: number };

async function withCpu(n: number, op: (i: number) => Promise<unknown>): Promise<Measured> {
  const c0 = process.cpuUsage();
  const s = await measure(n, op);
  const c = process.cpuUsage(c0);
  return { ...s, cpuUs: (c.user + c.system) / n };
}

async function suite(store: Store): Promise<Record<string, Measured>> {
  const p = `/ovsnet-bench/${randomUUID()}/`;
  const value = JSON.stringify({ holder: 'endpoint-0123456789abcdef', at: new Date().toISOString() });
  const results: Record<string, Measured> = {};
  // Untimed first: the client's first calls compile its code (a put's CPU read 1.4 ms cold, 0.8 warm).
  await measure(Math.min(N, 500), (i) => store.txn({ compares: [], success: [put(`${p}k${i % 256}`, value)] }));
  results.put = await withCpu(N, (i) => store.txn({ compares: [], success: [put(`${p}k${i % 256}`, value)] }));
  results.get = await withCpu(N, (i) => store.get(`${p}k${i % 256}`));
  let rev = (await store.txn({ compares: [], success: [put(`${p}cas`, '0')] })).revision;
  results.cas = await withCpu(N, async (i) => {
    const r = await store.txn({ compares: [modRevisionIs(`${p}cas`, rev)], success: [put(`${p}cas`, String(i))] });
    if (!r.succeeded) throw new Error('unexpected CAS conflict in a single-writer benchmark');
    rev = r.revision;
  });
  // The same puts with this process watching their prefix, as every ovsnet follows what it
  // writes (the IPAM index, the records): each put's event comes back and is decoded here.
  let seen = 0;
  const watcher = await store.watch(p, (await store.revision()) + 1, {
    onEvents: (events) => void (seen += events.length),
    onError: () => undefined,
  });
  results['put, watched'] = await withCpu(N, async (i) => {
    const want = seen + 1;
    await store.txn({ compares: [], success: [put(`${p}k${i % 256}`, value)] });
    while (seen < want) await new Promise((r) => setImmediate(r));
  });
  await watcher.close();
  await store.txn({ compares: [], success: [{ type: 'deletePrefix', prefix: p }] });
  return results;
}

export async function benchStore(): Promise<void> {
  const endpoints = process.env.TEST_ETCD_ENDPOINTS;
  if (endpoints === undefined) throw new Error('TEST_ETCD_ENDPOINTS is not set: run through `npm run bench -- store`');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-bench-'));
  const sqlite = new SqliteStore({ file: path.join(dir, 'bench.db') });
  const etcd = new EtcdStore({ endpoints: endpoints.split(',').map((e) => `http://${e}`), timeoutMs: 5000 });
  try {
    const base = await suite(sqlite);
    const remote = await suite(etcd);
    const rows: string[][] = [];
    for (const [name, res] of [
      ['embedded (sqlite)', base],
      ['etcd', remote],
    ] as const) {
      for (const op of ['put', 'get', 'cas', 'put, watched'] as const) {
        const r = res[op];
        const b = base[op];
        if (r === undefined || b === undefined) continue;
        rows.push([
          name,
          op,
          fmt(r.perSecond, 0),
          fmt(r.p50Ms, 3),
          fmt(r.p99Ms, 3),
          `${fmt(r.perSecond / b.perSecond)}x`,
          fmt(r.cpuUs, 0),
          `${fmt(r.cpuUs / b.cpuUs)}x`,
        ]);
      }
    }
    console.log(
      `store benchmark: ${N} sequential operations each, one client (load ${os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')})\n`,
    );
    console.log(
      table(['backend', 'op', 'ops/s', 'p50 ms', 'p99 ms', 'ops/s vs embedded', "this process's CPU µs per op", 'CPU vs embedded'], rows),
    );
  } finally {
    await sqlite.close();
    await etcd.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
