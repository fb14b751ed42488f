/**
 * Scale benchmark, every figure next to its baseline from the same run:
 * 1. Pool memory, in process: the offset set of a /8 at 1% use, allocated next-fit (as dynamic
 *    addresses are) and scattered at random (static addresses), against an empty one.
 * 2. 10k endpoints on one store, on a simulated host (embedded store): BENCH_SCALE (10,000)
 *    addresses reserved and endpoints created through the plugin socket (RequestAddress +
 *    CreateEndpoint: the records, not containers). Daemon RSS, start-up reconcile, `ovsnet ipam`
 *    and `ovsnet endpoints --json` times, RequestAddress p50: each with the store empty (the
 *    baseline) and with the 10k records.
 * 3. etcd's write capacity here (64 writers at once) against what the cluster's IPAM needs at
 *    200 hosts x 10 container starts per second.
 * 4. 200 hosts as light agents, and one full host among them on a real Open vSwitch (bench/hosts.ts).
 */
import fs from 'node:fs';
import { EtcdStore } from '../src/store/etcd/etcd.js';
import { put } from '../src/store/types.js';
import { offsetSetFor, type Bitmap } from '../src/ipam-driver/index/offsets.js';
import { DockerHost, MAIN, pluginCall, type Ovsnet } from '../test/harness/host.js';
import { benchHosts } from './hosts.js';
import { fmt, percentile, table } from './stats.js';

const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;

function poolMemory(): string[][] {
  const size = 1n << 24n;
  const used = Number(size / 100n);
  const heap = () => {
    global.gc?.();
    return process.memoryUsage().heapUsed + process.memoryUsage().arrayBuffers;
  };
  const rows: string[][] = [];
  const h0 = heap();
  const empty = offsetSetFor(size) as Bitmap;
  const baseKiB = (heap() - h0) / 1024;
  rows.push(['/8, empty [baseline]', String(empty.chunkCount), fmt(baseKiB, 0)]);
  for (const [label, pick] of [
    ['/8, 1% next-fit (dynamic addresses)', (i: number) => BigInt(i)],
    ['/8, 1% scattered (static addresses)', (i: number) => BigInt((i * 2654435761) % Number(size))],
  ] as const) {
    const before = heap();
    const set = offsetSetFor(size) as Bitmap;
    for (let i = 0; i < used; i++) set.add(pick(i));
    const kib = (heap() - before) / 1024;
    rows.push([label, String(set.chunkCount), fmt(kib, 0), kib <= 1024 ? 'met' : 'NOT met']);
  }
  return rows;
}

interface Figures {
  rssMiB: number;
  /** V8's live heap (after a collection only if one ran: nodejs_heap_size_used_bytes), beside RSS, which V8 does not give back at once. */
  heapMiB: number;
  reconcileMs: number;
  ipamCliMs: number;
  endpointsCliMs: number;
  requestP50Ms: number;
}

async function figures(host: DockerHost, ovsnet: Ovsnet, reconcileMs: number, poolId: string): Promise<Figures> {
  const socket = ovsnet.socket;
  const cli = async (args: string[]) => {
    const t0 = process.hrtime.bigint();
    const r = await host.exec(['env', `OVSNET_STORE=sqlite:${host.storeFile}`, process.execPath, MAIN, ...args]);
    if (r.code !== 0) throw new Error(`ovsnet ${args.join(' ')}: ${r.stderr}`);
    return ms(t0);
  };
  const req: number[] = [];
  for (let i = 0; i < 200; i++) {
    const t0 = process.hrtime.bigint();
    const r = await pluginCall(socket, 'IpamDriver.RequestAddress', { PoolID: poolId, Address: '', Options: {} });
    req.push(ms(t0));
    const address = (r.body as { Address?: string }).Address ?? '';
    await pluginCall(socket, 'IpamDriver.ReleaseAddress', { PoolID: poolId, Address: address.split('/')[0] });
  }
  req.sort((a, b) => a - b);
  const rss = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${servePid(ovsnet)}/status`, 'utf8'))?.[1];
  const metrics = (await host.exec(['wget', '-q', '-O', '-', 'http://127.0.0.1:9477/metrics'])).stdout;
  const heap = Number(/^nodejs_heap_size_used_bytes (\S+)$/m.exec(metrics)?.[1]);
  return {
    rssMiB: Number(rss) / 1024,
    heapMiB: heap / 2 ** 20,
    reconcileMs,
    ipamCliMs: await cli(['ipam']),
    endpointsCliMs: await cli(['endpoints', '--json']),
    requestP50Ms: percentile(req, 0.5),
  };
}

function servePid(o: Ovsnet): number {
  const pid = o.child.pid ?? 0;
  if (fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('serve')) return pid;
  const child = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(' ')[0];
  return Number(child);
}

/** Starts ovsnet; resolves with it and the ms until its start-up reconcile was logged. */
async function start(host: DockerHost): Promise<{ ovsnet: Ovsnet; reconcileMs: number }> {
  const t0 = process.hrtime.bigint();
  const ovsnet = await host.startOvsnet({ OVSNET_LOG_LEVEL: 'info' }); // the reconcile line is at info
  for (let i = 0; i < 600 && !ovsnet.log.includes('reconciled the store with OVS'); i++) await new Promise((r) => setTimeout(r, 50));
  return { ovsnet, reconcileMs: ms(t0) };
}

async function tenThousand(): Promise<{ rows: string[][]; n: number; fabricateS: number }> {
  const n = Number(process.env.BENCH_SCALE ?? 10_000);
  const host = await DockerHost.up('benchscale');
  let current: Ovsnet | undefined;
  try {
    let s = await start(host);
    current = s.ovsnet;
    const call = async (method: string, body: unknown) => {
      // The first CreateNetwork makes the bridge: on a loaded machine it can outlast the
      // harness's 5 s bound. Every call made here is safe to repeat (the same request again).
      const once = () => pluginCall(s.ovsnet.socket, method, body);
      const r = await once().catch(once).catch(once);
      if (r.status !== 200) throw new Error(`${method}: ${JSON.stringify(r.body)}`);
      return r.body as Record<string, string>;
    };
    const { PoolID: poolId = '' } = await call('IpamDriver.RequestPool', {
      AddressSpace: 'LocalDefault',
      Pool: '10.0.0.0/8',
      SubPool: '',
      Options: {},
      V6: false,
    });
    const gw = await call('IpamDriver.RequestAddress', {
      PoolID: poolId,
      Address: '',
      Options: { RequestAddressType: 'com.docker.network.gateway' },
    });
    const NetworkID = 'ab'.repeat(32);
    await call('NetworkDriver.CreateNetwork', {
      NetworkID,
      Options: {},
      IPv4Data: [{ AddressSpace: 'LocalDefault', Pool: '10.0.0.0/8', Gateway: gw.Address }],
      IPv6Data: [],
    });
    const empty = await figures(host, s.ovsnet, s.reconcileMs, poolId);
    await s.ovsnet.kill('SIGTERM');
    s = await start(host);
    current = s.ovsnet;
    const emptyReconcile = s.reconcileMs;
    const t0 = process.hrtime.bigint();
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < n; i = next++) {
        const { Address = '' } = await call('IpamDriver.RequestAddress', { PoolID: poolId, Address: '', Options: {} });
        await call('NetworkDriver.CreateEndpoint', {
          NetworkID,
          EndpointID: `f${i.toString(16).padStart(63, '0')}`,
          Interface: { Address, AddressIPv6: '', MacAddress: '' },
          Options: {},
        });
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    const fabricateS = ms(t0) / 1000;
    await s.ovsnet.kill('SIGTERM');
    s = await start(host);
    current = s.ovsnet;
    const full = await figures(host, s.ovsnet, s.reconcileMs, poolId);
    const row = (label: string, unit: string, e: number, f: number, target: string, ok: boolean) => [
      label,
      `${fmt(e, 1)} ${unit}`,
      `${fmt(f, 1)} ${unit}`,
      `${fmt(f / e)}x`,
      target,
      target === '' ? '' : ok ? 'met' : 'NOT met',
    ];
    return {
      n,
      fabricateS,
      rows: [
        row('daemon RSS', 'MiB', empty.rssMiB, full.rssMiB, '<= 100 MB', full.rssMiB * 1.048576 <= 100),
        row('daemon V8 heap used (of that RSS)', 'MiB', empty.heapMiB, full.heapMiB, '', true),
        row('start-up to reconcile done', 'ms', emptyReconcile, full.reconcileMs, '<= 5 s', full.reconcileMs <= 5000),
        row('ovsnet ipam', 'ms', empty.ipamCliMs, full.ipamCliMs, '<= 1 s', full.ipamCliMs <= 1000),
        row('ovsnet endpoints --json', 'ms', empty.endpointsCliMs, full.endpointsCliMs, '<= 1 s', full.endpointsCliMs <= 1000),
        row(
          'RequestAddress p50 (200)',
          'ms',
          empty.requestP50Ms,
          full.requestP50Ms,
          'unchanged',
          full.requestP50Ms <= empty.requestP50Ms * 1.25,
        ),
      ],
    };
  } finally {
    await host.down();
    await current?.kill('SIGTERM');
  }
}

/** etcd txn/s with 64 writers at once (single-key puts, as a reservation is). */
async function etcdCapacity(): Promise<number> {
  const endpoints = process.env.TEST_ETCD_ENDPOINTS;
  if (endpoints === undefined) throw new Error('TEST_ETCD_ENDPOINTS is not set: run through `npm run bench -- scale`');
  const store = new EtcdStore({ endpoints: endpoints.split(',').map((e) => `http://${e}`), timeoutMs: 5000 });
  try {
    const total = 4000;
    let next = 0;
    const t0 = process.hrtime.bigint();
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        for (let i = next++; i < total; i = next++)
          await store.txn({ compares: [], success: [put(`/ovsnet-bench-cap/k${i % 512}`, String(i))] });
      }),
    );
    const perS = total / (ms(t0) / 1000);
    await store.txn({ compares: [], success: [{ type: 'deletePrefix', prefix: '/ovsnet-bench-cap/' }] });
    return perS;
  } finally {
    await store.close();
  }
}

export async function benchScale(): Promise<void> {
  console.log('Pool memory, in process (offsets.ts); target: a /8 at 1% <= 1 MiB\n');
  console.log(table(['pool', 'chunks', 'KiB', 'verdict'], poolMemory()));
  const capacity = await etcdCapacity();
  // Per container start with ovsnet's IPAM: RequestAddress (1 write) + CreateEndpoint (1); stop:
  // DeleteEndpoint (1) + ReleaseAddress (1).
  const needed = 200 * 10 * 4;
  console.log(`\netcd here: ${fmt(capacity, 0)} txn/s with 64 writers at once (the baseline)`);
  console.log(
    `the cluster's IPAM at 200 hosts x 10 starts/s (and as many stops): ${needed} writes/s = ${fmt(needed / capacity)}x etcd's measured capacity`,
  );
  if (process.env.BENCH_HOSTS !== '0') await benchHosts(process.env.TEST_ETCD_ENDPOINTS?.split(',').map((e) => `http://${e}`) ?? []);
  const { rows, n, fabricateS } = await tenThousand();
  console.log(`\n${n} endpoints and reservations in one /8 on the embedded store (made over the socket in ${fmt(fabricateS, 1)} s)\n`);
  console.log(table(['figure', 'empty store [baseline]', `${n} endpoints`, 'vs empty', 'target', 'verdict'], rows));
}
