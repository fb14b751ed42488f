/**
 * Many hosts: BENCH_HOSTS (200) light agents in this process (bench/agent.ts),
 * each with its own etcd client against the real etcd of the run, doing what ovsnet does for the
 * cluster and nothing else: the host registry, membership of one logical network, and the
 * tunnels into an in-memory OVS. No dockerd, no kernel. Measured: how long after a new host
 * registers and joins until every peer has its tunnel, and the watch events and bytes each host
 * receives per change. Among them one full host (bench/full-host.ts; BENCH_FULL_HOST=0 leaves it
 * out) whose tunnels drive a real Open vSwitch: its initial sync when it joins the network all
 * the agents are members of, and the tunnel-add time for one new peer (5 peers joining one
 * after the other). The baseline is the same with 2 agents (the first two alone), in the same
 * run, on the same full host.
 */
import fs from 'node:fs';
import os from 'node:os';
import { tunnelName } from '../src/driver/vxlan/tunnels.js';
import { FakeOvs } from '../test/helpers/driver-fakes.js';
import { agent, agentVtep, type Agent } from './agent.js';
import { FullHost, type SyncFigures, type TunnelAdd } from './full-host.js';
import { fmt, median, table } from './stats.js';

async function light(endpoints: string[], index: number, logical: string, vni: number, tunnelsLater = false): Promise<Agent<FakeOvs>> {
  const ovs = new FakeOvs();
  await ovs.ensureBridge('br0', 'system', 'standalone');
  return agent(endpoints, { index, logical, vni, ovs, tunnelsLater });
}

/**
 * From this many agents on, they all register and join first and start their tunnels after:
 * meshing one by one cost this one process every agent's full sync per join (O(n^2) per join,
 * all on its 2 cores), which at ~500 agents stalled its loop past the etcd client's 10 s timeout.
 * A peer's join now costs each agent one tunnel (tunnels.ts), but each start still loads every
 * member key and makes a full sync; one by one was not measured again.
 */
const MESH_AT_ONCE = Number(process.env.BENCH_MESH_AT_ONCE ?? 300);

const tunnelsOf = (a: Agent<FakeOvs>) => [...a.ovs.ports.keys()].filter((p) => p.startsWith('ovx')).length;

async function until(what: string, ok: () => boolean, limitMs: number): Promise<number> {
  const t0 = Date.now();
  while (!ok()) {
    if (Date.now() - t0 > limitMs) throw new Error(`${what}: not within ${limitMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return Date.now() - t0;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Round {
  upMs: number;
  propagationMs: number;
  /** When the first agent, and half of them, had the new host's tunnel (ms after it started). */
  firstMs: number;
  medianMs: number;
  events: number;
  bytes: number;
  /** When the new host's registration and member key were written (ms after it started). */
  registeredMs: number;
  joinedMs: number;
  full?: { sync: SyncFigures; adds: TunnelAdd[] };
}

/**
 * `n` agents (and the full host, if given), then one more: ms until every earlier agent has its
 * tunnel; watch traffic per agent for that change. With the full host, 4 more then join one at
 * a time, each tunnel's way on the full host timed.
 */
async function round(endpoints: string[], n: number, vni: number, full: FullHost | undefined): Promise<Round> {
  const logical = `bench-scale-${vni}`;
  const agents: Agent<FakeOvs>[] = [];
  try {
    const t0 = Date.now();
    // In batches of 20: hundreds of etcd clients connecting and registering at once are a storm of their own.
    const later = n >= MESH_AT_ONCE;
    for (let i = 0; i < n; i += 20)
      agents.push(
        ...(await Promise.all(Array.from({ length: Math.min(20, n - i) }, (_, k) => light(endpoints, i + k, logical, vni, later)))),
      );
    for (let i = 0; later && i < n; i += 20) await Promise.all(agents.slice(i, i + 20).map((a) => a.startTunnels()));
    await until('the first hosts meshed', () => agents.every((a) => tunnelsOf(a) === n - 1), Math.max(120_000, n * 600));
    const upMs = Date.now() - t0;
    const sync = await full?.join(
      endpoints,
      logical,
      vni,
      agents.map((a) => a.vtepIp),
    );
    await sleep(500);
    const before = agents.map((a) => ({ ...a.seen }));
    const t1 = Date.now();
    const t1Perf = performance.now();
    const late = await light(endpoints, n, logical, vni);
    agents.push(late);
    const want = tunnelName(vni, late.vtepIp) ?? '';
    // One process runs every agent's sync in turn: the last agent's time is the sum of all their
    // work, the first's what one host alone would take.
    const reached: number[] = [];
    const waiting = new Set(agents.slice(0, n));
    const seen = () => {
      for (const a of waiting)
        if (a.ovs.ports.has(want)) {
          waiting.delete(a);
          reached.push(Date.now() - t1);
        }
      return waiting.size === 0;
    };
    await until('the new host reached', seen, 60_000);
    const propagationMs = Date.now() - t1;
    const adds = full === undefined ? [] : [await full.tunnelAdded(vni, late.vtepIp, t1Perf)];
    await sleep(500);
    const events = agents.slice(0, n).reduce((s, a, k) => s + a.seen.events - (before[k]?.events ?? 0), 0) / n;
    const bytes = agents.slice(0, n).reduce((s, a, k) => s + a.seen.bytes - (before[k]?.bytes ?? 0), 0) / n;
    for (let k = 1; full !== undefined && k < 5; k++) {
      const started = performance.now();
      agents.push(await light(endpoints, n + k, logical, vni));
      adds.push(await full.tunnelAdded(vni, agentVtep(n + k), started));
      await sleep(200);
    }
    return {
      upMs,
      propagationMs,
      firstMs: Math.min(...reached),
      medianMs: median(reached),
      events,
      bytes,
      registeredMs: late.wrote.registered - t1Perf,
      joinedMs: late.wrote.joined - t1Perf,
      ...(sync === undefined ? {} : { full: { sync, adds } }),
    };
  } finally {
    await full?.leave().catch((err: unknown) => console.error(`the full host did not leave cleanly: ${String(err)}`));
    await Promise.all(agents.map((a) => a.stop().catch(() => undefined)));
  }
}

/** Median, and the range when there are several. */
function spread(values: readonly number[]): string {
  const mid = fmt(median(values), 1);
  return values.length < 2 ? mid : `${mid} (${fmt(Math.min(...values), 1)}-${fmt(Math.max(...values), 1)})`;
}

function fullHostRows(base: NonNullable<Round['full']>, big: NonNullable<Round['full']>): string[][] {
  const row = (label: string, b: number | readonly number[], g: number | readonly number[], digits = 1): string[] => {
    const [bv, gv] = [b, g].map((v) => (typeof v === 'number' ? v : median(v))) as [number, number];
    const show = (v: number | readonly number[]) => (typeof v === 'number' ? fmt(v, digits) : spread(v));
    return [label, show(b), show(g), `${bv === 0 ? '-' : `${fmt(gv / bv)}x`}, ${gv - bv >= 0 ? '+' : ''}${fmt(gv - bv, 1)}`];
  };
  const adds = (r: NonNullable<Round['full']>, f: (a: TunnelAdd) => number) => r.adds.map(f);
  return [
    row("initial sync: joined until every peer's port is in OVSDB, ms", base.sync.inOvsdbMs, big.sync.inOvsdbMs, 0),
    row('initial sync: ... until ovs-vswitchd applied them, ms', base.sync.appliedMs, big.sync.appliedMs, 0),
    row("ports on br0 (tunnels + the bridge's own)", base.sync.portsOnBridge, big.sync.portsOnBridge, 0),
    row(
      'one new peer: watch event to port in OVSDB, ms',
      adds(base, (a) => a.inOvsdbMs),
      adds(big, (a) => a.inOvsdbMs),
    ),
    row(
      'one new peer: watch event to applied (waitApplied), ms',
      adds(base, (a) => a.appliedMs),
      adds(big, (a) => a.appliedMs),
    ),
    row(
      'one new peer: its start to applied on the full host, ms',
      adds(base, (a) => a.fromStartMs),
      adds(big, (a) => a.fromStartMs),
    ),
    row('ovs-vswitchd RSS, MiB', base.sync.rssMiB, big.sync.rssMiB),
    row('ovs-vswitchd CPU during the initial sync, ms', base.sync.syncCpuMs, big.sync.syncCpuMs, 0),
    row('ovs-vswitchd CPU idle, ms per s (10 s)', base.sync.idleCpuMsPerS, big.sync.idleCpuMsPerS),
    row('one tunnel alone, quiet: its OVS calls (ownPorts + addPort), ms', base.sync.tunnelOvsMs, big.sync.tunnelOvsMs),
    row('... until applied and cached flows dropped (afterAdding), ms', base.sync.tunnelAppliedMs, big.sync.tunnelAppliedMs),
    row("a Join's OVS calls (deletePort + addPort), ms, median of 5", base.sync.joinOvsMs, big.sync.joinOvsMs),
    row('... until ovs-vswitchd applied that port, ms', base.sync.joinAppliedMs, big.sync.joinAppliedMs),
  ];
}

const loadavg = () => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

export async function benchHosts(endpoints: string[]): Promise<void> {
  const n = Number(process.env.BENCH_HOSTS ?? 200);
  const full = process.env.BENCH_FULL_HOST === '0' ? undefined : await FullHost.up();
  try {
    const load0 = loadavg();
    const base = await round(endpoints, 2, 16_000_001, full);
    const big = await round(endpoints, n, 16_000_002, full);
    const load1 = loadavg();
    const others = full === undefined ? '' : ' + the full host';
    const rows = [
      [
        `2${others} + 1 new [baseline]`,
        fmt(base.upMs, 0),
        `${fmt(base.firstMs, 0)} / ${fmt(base.medianMs, 0)}`,
        fmt(base.propagationMs, 0),
        fmt(base.events, 1),
        fmt(base.bytes, 0),
        '',
      ],
      [
        `${n}${others} + 1 new`,
        fmt(big.upMs, 0),
        `${fmt(big.firstMs, 0)} / ${fmt(big.medianMs, 0)}`,
        fmt(big.propagationMs, 0),
        fmt(big.events, 1),
        fmt(big.bytes, 0),
        `${fmt(big.propagationMs / base.propagationMs)}x propagation, ${fmt(big.bytes / base.bytes)}x bytes`,
      ],
    ];
    console.log(
      `\nLight agents (registry, logical membership, tunnels into an in-memory OVS; each its own etcd client) in one process; targets: a new host's tunnels on every agent <= 2 s, watch bytes per host per change <= 1 KB. Machine: ${os.cpus().length} cores, load ${load0} before, ${load1} after\n`,
    );
    console.log(
      table(
        [
          'hosts',
          'agents meshed ms',
          'new host on the first / half of the agents ms',
          'new host on every agent ms',
          'watch events per host per change',
          'watch bytes per host per change',
          'vs baseline',
        ],
        rows,
      ),
    );
    console.log(`propagation: ${big.propagationMs <= 2000 ? 'met' : 'NOT met'}; watch bytes: ${big.bytes <= 1024 ? 'met' : 'NOT met'}`);
    console.log(
      `the new host's own start: its registry up at ${fmt(big.registeredMs, 0)} ms, member key written at ${fmt(big.joinedMs, 0)} ms (with 2: ${fmt(base.registeredMs, 0)}, ${fmt(base.joinedMs, 0)}); the agents' part of the propagation is what follows`,
    );
    if (n >= MESH_AT_ONCE)
      console.log(`meshed: the ${n} agents registered and joined first, then started their tunnels (BENCH_MESH_AT_ONCE=${MESH_AT_ONCE})`);
    if (full === undefined || base.full === undefined || big.full === undefined) return;
    console.log(
      `\nThe full host: tunnels into a real Open vSwitch (${await full.version()}, userspace datapath, in a simulated host), through ovsnet's OVSDB client; one new peer: median (range) of 5 joining one after the other. Machine: ${os.cpus().length} cores, load ${load0} before, ${load1} after\n`,
    );
    console.log(table(['full host', `2 peers [baseline]`, `${n} peers`, 'vs baseline'], fullHostRows(base.full, big.full)));
    console.log(
      `"one new peer" rows: the ${n} agents in this process handle the same change at the same time; "quiet" rows: the full host's OVS calls alone`,
    );
  } finally {
    await full?.down();
  }
}
