/**
 * IPAM benchmark.
 * 1. The in-process allocator (PoolState: next-fit search + mark) on a /16 kept at 0%, 50% and
 *    95% full: allocations per second. Baseline: the 0% figure.
 * 2. RequestAddress + ReleaseAddress over the real plugin socket against `ovsnet serve` (a child
 *    process), embedded and etcd: p50 and p99. Baseline: Plugin.Activate on the same socket,
 *    i.e. the HTTP round trip with no work behind it.
 * 3. Binding a reservation to its endpoint (CreateEndpoint's store work) against etcd with many
 *    pools: the pools found in the IPAM index vs every pool record read (the baseline, as before).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/config/config.js';
import { PoolState } from '../src/ipam-driver/index/pool-index.js';
import { bindReservation } from '../src/ipam-driver/allocation/bind-endpoint.js';
import { openStore } from '../src/store/open.js';
import { makeIpam, pool } from '../test/helpers/ipam.js';
import { NO_OVS } from '../test/harness/host.js';
import { fmt, measure, percentile, table } from './stats.js';

const MAIN = fileURLToPath(new URL('../src/main.js', import.meta.url));

function allocator(fill: number, total: number): number {
  const pool = new PoolState({
    poolId: 'bench',
    addressSpace: 'LocalDefault',
    pool: '10.0.0.0/16',
    v6: false,
    dynamic: false,
    options: {},
    host: 'bench',
    createdAt: '',
  });
  const usable = Number(pool.capacity);
  let seed = 7;
  const rand = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff), seed / 0x7fffffff);
  for (let i = 1; i <= usable; i++) if (rand() < fill) pool.mark((10n << 24n) | BigInt(i), true);
  const batch = Math.max(1, Math.min(1000, Math.floor((usable - pool.reserved.count) / 2)));
  const taken: bigint[] = new Array<bigint>(batch);
  let done = 0;
  let ns = 0n;
  while (done < total) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < batch; i++) {
      const a = pool.candidate();
      if (a === undefined) throw new Error('pool full');
      pool.mark(a, true);
      pool.cursor = a + 1n;
      taken[i] = a;
    }
    ns += process.hrtime.bigint() - t0;
    // Give them back (untimed) so the fill level stays where it was.
    for (let i = 0; i < batch; i++) pool.mark(taken[i] ?? 0n, false);
    done += batch;
  }
  return done / (Number(ns) / 1e9);
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
function call(socketPath: string, method: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, path: `/${method}`, method: 'POST', agent }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) as Record<string, unknown> }));
    });
    req.on('error', reject);
    req.end(body === undefined ? '' : JSON.stringify(body));
  });
}

async function overSocket(store: string, n: number): Promise<{ activate: number[]; request: number[]; release: number[] }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-bench-'));
  const socket = path.join(dir, 'ovsnet.sock');
  const storeUrl = store === 'sqlite' ? `sqlite:${dir}/state.db` : store;
  const child = spawn(process.execPath, [MAIN, 'serve'], {
    env: { PATH: process.env.PATH ?? '', OVSNET_SOCKET: socket, OVSNET_STORE: storeUrl, OVSNET_LOG_LEVEL: 'error', OVSNET_OVSDB: NO_OVS },
    stdio: 'inherit',
  });
  try {
    for (let i = 0; i < 200 && !fs.existsSync(socket); i++) await new Promise((r) => setTimeout(r, 25));
    const subnet = `10.${100 + Math.floor(Math.random() * 100)}.0.0/16`;
    const pool = await call(socket, 'IpamDriver.RequestPool', {
      AddressSpace: 'LocalDefault',
      Pool: subnet,
      SubPool: '',
      Options: {},
      V6: false,
    });
    if (pool.status !== 200) throw new Error(JSON.stringify(pool.json));
    const PoolID = pool.json.PoolID;
    const time = async (f: () => Promise<unknown>) => {
      const t0 = process.hrtime.bigint();
      await f();
      return Number(process.hrtime.bigint() - t0) / 1e6;
    };
    const out = { activate: [] as number[], request: [] as number[], release: [] as number[] };
    for (let i = 0; i < n + 100; i++) {
      const a = await time(() => call(socket, 'Plugin.Activate', undefined));
      let address = '';
      const q = await time(async () => {
        const r = await call(socket, 'IpamDriver.RequestAddress', { PoolID, Address: '', Options: null });
        if (r.status !== 200) throw new Error(JSON.stringify(r.json));
        address = String(r.json.Address).split('/')[0] ?? '';
      });
      const l = await time(() => call(socket, 'IpamDriver.ReleaseAddress', { PoolID, Address: address }));
      if (i >= 100) {
        // the first 100 rounds warm up the JIT and the connection
        out.activate.push(a);
        out.request.push(q);
        out.release.push(l);
      }
    }
    await call(socket, 'IpamDriver.ReleasePool', { PoolID });
    return out;
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** p50/p99 of binding one address's reservation `n` times, pools found either way. */
async function binding(endpoints: string, pools: number, n: number, octet: number): Promise<string[][]> {
  const config = loadConfig({ OVSNET_STORE: `etcd://${endpoints}` });
  const store = await openStore(config.store, 3000).loaded();
  const ipam = makeIpam(store, { host: 'bench' });
  try {
    ipam.start();
    for (let i = 0; i < pools; i++) await ipam.requestPool(pool(`10.${octet + (i >> 8)}.${i & 255}.0/24`));
    const poolId = `LocalDefault/10.${octet}.0.0/24`;
    const address = (await ipam.requestAddress({ poolId, address: '', gateway: false })).address.split('/')[0] ?? '';
    const ways = [
      ['every pool record read (baseline)', () => undefined],
      ['pools from the IPAM index', () => ipam.poolsHolding(address)],
    ] as const;
    const out: string[][] = [];
    let base = NaN;
    for (const [name, poolsOf] of ways) {
      // A new endpoint id each time: every bind writes, as CreateEndpoint's does.
      for (let i = 0; i < 20; i++) await bindReservation(store, address, `warm${i}`, poolsOf());
      const r = await measure(n, (i) => bindReservation(store, address, `${name}${i}`, poolsOf()));
      if (Number.isNaN(base)) base = r.p50Ms;
      out.push([String(pools), name, fmt(r.p50Ms, 3), fmt(r.p99Ms, 3), `${fmt(r.p50Ms / base)}x`]);
    }
    return out;
  } finally {
    await ipam.stop();
    await store.close();
  }
}

export async function benchIpam(): Promise<void> {
  const endpoints = process.env.TEST_ETCD_ENDPOINTS;
  if (endpoints === undefined) throw new Error('TEST_ETCD_ENDPOINTS is not set: run through `npm run bench -- ipam`');

  const total = Number(process.env.BENCH_ALLOCS ?? 2_000_000);
  allocator(0.5, 200_000); // warm-up
  const rates = [0, 0.5, 0.95].map((f) => [f, allocator(f, total)] as const);
  const base = rates[0]?.[1] ?? NaN;
  console.log(`in-process allocator, /16 (65534 usable), ${total} allocations per fill level; target >= 1,000,000/s\n`);
  console.log(
    table(
      ['fill', 'allocations/s', 'vs 0% full', 'target met'],
      rates.map(([f, r]) => [`${Math.round(f * 100)}%`, fmt(r, 0), `${fmt(r / base)}x`, r >= 1e6 ? 'yes' : 'NO']),
    ),
  );

  const n = Number(process.env.BENCH_N ?? 1000);
  const rows: string[][] = [];
  for (const [name, store, target] of [
    ['embedded', 'sqlite', 1],
    ['etcd', `etcd://${endpoints}`, 3],
  ] as const) {
    const r = await overSocket(store, n);
    const s = (xs: number[]) => [...xs].sort((a, b) => a - b);
    const [a, q, l] = [s(r.activate), s(r.request), s(r.release)];
    const act = percentile(a, 0.5);
    rows.push([name, 'Plugin.Activate (baseline)', fmt(act, 3), fmt(percentile(a, 0.99), 3), '1.00x', '']);
    rows.push([
      name,
      'RequestAddress',
      fmt(percentile(q, 0.5), 3),
      fmt(percentile(q, 0.99), 3),
      `${fmt(percentile(q, 0.5) / act)}x`,
      `p50 <= ${target} ms: ${percentile(q, 0.5) <= target ? 'yes' : 'NO'}`,
    ]);
    rows.push([name, 'ReleaseAddress', fmt(percentile(l, 0.5), 3), fmt(percentile(l, 0.99), 3), `${fmt(percentile(l, 0.5) / act)}x`, '']);
  }
  console.log(`\nover the plugin socket (ovsnet serve, one keep-alive connection, ${n} rounds after 100 warm-up)\n`);
  console.log(table(['store', 'call', 'p50 ms', 'p99 ms', 'p50 vs Activate', 'target'], rows));

  const binds: string[][] = [];
  for (const [pools, octet] of [
    [10, 160],
    [500, 170],
  ] as const)
    binds.push(...(await binding(endpoints, pools, 300, octet)));
  console.log('\nCreateEndpoint binding its reservation, etcd: finding the pool (300 binds, each a get + a txn)\n');
  console.log(table(['pools', 'how the pool is found', 'p50 ms', 'p99 ms', 'p50 vs baseline'], binds));
}
