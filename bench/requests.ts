/**
 * Requests benchmark: what the plugin socket's server costs per Docker call. A server process
 * (bench/requests-server.ts: the real Fastify app over in-memory OVS, links and NAT, a real
 * embedded store) answers BENCH_REQUESTS (5,000) calls of each kind, one at a time on one
 * kept-alive connection as Docker's client makes them (POST, the plugin Accept header, no
 * Content-Type), in BENCH_PASSES (3) interleaved passes. Per kind: the server's CPU per call
 * (its process.cpuUsage, user + system; the median and the least of the passes: on a machine
 * shared with other work the least is the steadiest) and the round trip's p50 and p99 over all
 * passes. Baseline: IpamDriver.GetCapabilities, the bare round trip.
 * BENCH_CPU_PROF=DIR runs the server under `node --cpu-prof` and prints its top frames
 * (bench/cpu-profile.ts). BENCH_HEAP_PROF=1 adds, after the timed passes, one pass of each kind
 * with the server's allocations sampled (bench/heap-profile.ts): bytes per round by owner and,
 * for the lifecycle, by function.
 */
import { fork } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { topFrames } from './cpu-profile.js';
import { allocationFrames, allocationOwners, type Allocations } from './heap-profile.js';
import { fmt, median, percentile, table } from './stats.js';

const SERVER = fileURLToPath(new URL('./requests-server.js', import.meta.url));
const NETWORK = 'ab'.repeat(32);
const ENDPOINT = 'cd'.repeat(32);

/** One POST as Docker's plugin client sends it; resolves with the status and body once read. */
function post(agent: http.Agent, socketPath: string, method: string, body?: unknown): Promise<{ status: number; text: string }> {
  const payload = body === undefined ? '' : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        socketPath,
        agent,
        method: 'POST',
        path: `/${method}`,
        headers: { accept: 'application/vnd.docker.plugins.v1.2+json', 'content-length': Buffer.byteLength(payload) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** A call's body made from the answers of the calls before it (by method). */
type MadeBody = (answers: ReadonlyMap<string, Record<string, unknown>>) => unknown;

interface Kind {
  readonly name: string;
  /** The calls of one round; each round is timed whole. */
  readonly calls: readonly { readonly method: string; readonly body?: unknown; readonly made?: MadeBody }[];
}

const ids = { NetworkID: NETWORK, EndpointID: ENDPOINT };
const lifeIds = { NetworkID: NETWORK, EndpointID: 'ef'.repeat(32) };
const answer = (a: ReadonlyMap<string, Record<string, unknown>>, method: string, field: string): string => {
  const v = a.get(method)?.[field];
  if (typeof v !== 'string') throw new Error(`${method} gave no ${field}`);
  return v;
};
const poolOf = (a: ReadonlyMap<string, Record<string, unknown>>) => answer(a, 'IpamDriver.RequestPool', 'PoolID');
const addressOf = (a: ReadonlyMap<string, Record<string, unknown>>) => answer(a, 'IpamDriver.RequestAddress', 'Address');
const KINDS_ALL: readonly Kind[] = [
  { name: 'IpamDriver.GetCapabilities [baseline]', calls: [{ method: 'IpamDriver.GetCapabilities' }] },
  { name: 'NetworkDriver.GetCapabilities', calls: [{ method: 'NetworkDriver.GetCapabilities' }] },
  { name: 'NetworkDriver.EndpointOperInfo', calls: [{ method: 'NetworkDriver.EndpointOperInfo', body: ids }] },
  {
    name: 'NetworkDriver.Join + Leave (per pair)',
    calls: [
      { method: 'NetworkDriver.Join', body: { ...ids, SandboxKey: '/var/run/docker/netns/x', Options: {} } },
      { method: 'NetworkDriver.Leave', body: ids },
    ],
  },
  {
    // A container's calls as Docker makes them with ovsnet's IPAM, a dynamic address each time.
    name: 'a container lifecycle (7 calls)',
    calls: [
      { method: 'IpamDriver.RequestAddress', made: (a) => ({ PoolID: poolOf(a), Address: '', Options: {} }) },
      {
        method: 'NetworkDriver.CreateEndpoint',
        made: (a) => ({ ...lifeIds, Interface: { Address: addressOf(a), AddressIPv6: '', MacAddress: '' }, Options: {} }),
      },
      { method: 'NetworkDriver.Join', body: { ...lifeIds, SandboxKey: '/var/run/docker/netns/y', Options: {} } },
      { method: 'NetworkDriver.EndpointOperInfo', body: lifeIds },
      { method: 'NetworkDriver.Leave', body: lifeIds },
      { method: 'NetworkDriver.DeleteEndpoint', body: lifeIds },
      { method: 'IpamDriver.ReleaseAddress', made: (a) => ({ PoolID: poolOf(a), Address: addressOf(a).split('/')[0] }) },
    ],
  },
];
// BENCH_ONLY=PREFIX: only the kinds whose name starts with it (for a profile of one kind).
const KINDS = KINDS_ALL.filter((k) => k.name.startsWith(process.env.BENCH_ONLY ?? ''));

export async function benchRequests(): Promise<void> {
  const n = Number(process.env.BENCH_REQUESTS ?? 5000);
  const profDir = process.env.BENCH_CPU_PROF;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-bench-req-'));
  const socket = path.join(dir, 'ovsnet.sock');
  const child = fork(SERVER, [socket], {
    execArgv: profDir === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', profDir],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const reply = <T>(): Promise<T> => new Promise((resolve) => child.once('message', (m) => resolve(m as T)));
  await reply<string>();
  const cpu = async (): Promise<number> => {
    const answer = reply<NodeJS.CpuUsage>();
    child.send('cpu');
    const u = await answer;
    return u.user + u.system;
  };
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const call = async (method: string, body?: unknown): Promise<Record<string, unknown>> => {
    const { status, text } = await post(agent, socket, method, body);
    if (status !== 200) throw new Error(`${method} answered ${status}: ${text}`);
    return JSON.parse(text) as Record<string, unknown>;
  };
  /** The answers of the set-up's calls and of the round under way, by method. */
  const answers = new Map<string, Record<string, unknown>>();
  const rows: string[][] = [];
  const heapTables: { title: string; rows: string[][] }[] = [];
  try {
    // As Docker makes a network with ovsnet's IPAM: the pool, its gateway, then the network.
    answers.set(
      'IpamDriver.RequestPool',
      await call('IpamDriver.RequestPool', { AddressSpace: 'LocalDefault', Pool: '10.77.0.0/16', SubPool: '', Options: {}, V6: false }),
    );
    const gateway = { RequestAddressType: 'com.docker.network.gateway' };
    await call('IpamDriver.RequestAddress', { PoolID: poolOf(answers), Address: '10.77.0.1', Options: gateway });
    await call('NetworkDriver.CreateNetwork', {
      NetworkID: NETWORK,
      Options: {},
      IPv4Data: [{ AddressSpace: 'LocalDefault', Pool: '10.77.0.0/16', Gateway: '10.77.0.1/16' }],
      IPv6Data: [],
    });
    await call('IpamDriver.RequestAddress', { PoolID: poolOf(answers), Address: '10.77.0.2', Options: {} });
    await call('NetworkDriver.CreateEndpoint', {
      ...ids,
      Interface: { Address: '10.77.0.2/16', AddressIPv6: '', MacAddress: '' },
      Options: {},
    });
    // PASSES passes over every kind, interleaved, so that a busy moment of the machine lands on
    // one pass of each rather than on one kind; each figure is the median of its passes.
    const passes = Number(process.env.BENCH_PASSES ?? 3);
    const cpuUs = KINDS.map((): number[] => []);
    const lat = KINDS.map((): number[] => []);
    const rounds = KINDS.map((kind) => async () => {
      for (const c of kind.calls) answers.set(c.method, await call(c.method, c.made === undefined ? c.body : c.made(answers)));
    });
    // A whole untimed pass first: the JIT, the caches, the record cache warm for every kind.
    for (const round of rounds) for (let i = 0; i < n; i++) await round();
    for (let pass = 0; pass < passes; pass++) {
      for (const [k, round] of rounds.entries()) {
        const u0 = await cpu();
        for (let i = 0; i < n; i++) {
          const t0 = process.hrtime.bigint();
          await round();
          lat[k]?.push(Number(process.hrtime.bigint() - t0) / 1e3);
        }
        cpuUs[k]?.push(((await cpu()) - u0) / n);
      }
    }
    if (process.env.BENCH_HEAP_PROF === '1') {
      for (const [k, round] of rounds.entries()) {
        const sampling = reply<string>();
        child.send('heap-start');
        await sampling;
        for (let i = 0; i < n; i++) await round();
        const sampled = reply<Allocations>();
        child.send('heap-stop');
        const bytes = await sampled;
        const name = KINDS[k]?.name ?? '';
        heapTables.push({ title: `${name}, by owner`, rows: allocationOwners(bytes, n) });
        if (k === KINDS.length - 1) heapTables.push({ title: `${name}, by function`, rows: allocationFrames(bytes, n, 30) });
      }
    }
    const baseUs = median(cpuUs[0] ?? []);
    for (const [k, kind] of KINDS.entries()) {
      const us = median(cpuUs[k] ?? []);
      const sorted = (lat[k] ?? []).sort((a, b) => a - b);
      rows.push([
        kind.name,
        fmt(us, 1),
        fmt(Math.min(...(cpuUs[k] ?? [])), 1),
        (cpuUs[k] ?? []).map((u) => fmt(u, 0)).join(' / '),
        `${fmt(us / baseUs)}x`,
        fmt(percentile(sorted, 0.5), 0),
        fmt(percentile(sorted, 0.99), 0),
      ]);
    }
  } finally {
    agent.destroy();
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.send('stop');
    await exited;
    fs.rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    `The plugin socket's server per Docker call: ${n} calls of each kind after warm-up, one at a time on one kept-alive connection\n`,
  );
  console.log(
    table(['call', 'server CPU µs per call (median)', 'least pass', 'each pass', 'vs baseline', 'round trip p50 µs', 'p99 µs'], rows),
  );
  for (const { title, rows: r } of heapTables) {
    console.log(`\nThe server's allocations per round, ${title} (V8's sampling estimate, freed objects included):\n`);
    console.log(table(title.endsWith('function') ? ['bytes', '%', 'function', 'where'] : ['bytes', '%', 'owner'], r));
  }
  if (profDir !== undefined) {
    const file = fs
      .readdirSync(profDir)
      .filter((f) => f.endsWith('.cpuprofile'))
      .map((f) => path.join(profDir, f))
      .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs)[0];
    if (file !== undefined) {
      console.log(`\nThe server's top frames by self time (${file}; share of its busy time, set-up and warm-up included):\n`);
      console.log(table(['self % of busy', 'self ms', 'function', 'where'], topFrames(file, 25)));
    }
  }
}
