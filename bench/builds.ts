/**
 * `npm run bench -- builds`: ovsnet's CPU per container start, build against build, in one run.
 * BENCH_BUILDS='A|B|...': each another build's dist/src/main.js, `this` for this one, or `null`
 * for the null driver (null-driver.ts: the remote protocol's floor, Docker's IPAM, no store), or
 * `floor` for the floor of ovsnet's design (floor-driver.ts: its outside work alone, on its packages);
 * the first is the baseline (default: `this`). Each storm runs on a cluster of its own: one
 * simulated host, its dockerd and Open vSwitch, and an empty etcd, so that builds of different
 * store layouts can be set side by side (a build refuses a store a later layout wrote, which the
 * cluster suite's BENCH_STORM_FLAGS cannot get past: it restarts one daemon on a shared etcd).
 * Each build as it ships: its plugin's node flags, its own defaults, metrics served as the
 * benches read them (BENCH_METRICS=0: not served, ovsnet's default). On a logical network
 * (VXLAN, ovsnet's IPAM), BENCH_STORM_ROUNDS (2) rounds, the builds in turn (A B A B): BENCH_WARM
 * (20) containers started and removed first (the daemon's code warm; their CPU per start is printed
 * as well, cold), 10 s asked nothing (its idle rate), BENCH_ONE (20; 0: none) containers started
 * one after another and removed so (the machine otherwise idle: the figure without the storm's
 * load), 10 s asked nothing again, then BENCH_STORM (100) parallel `docker run -d`, and their
 * removal. BENCH_DAEMON_FLAGS (space-separated) adds node flags to each ovsnet build's and the
 * floor's, e.g. `--cpu-prof --cpu-prof-dir=DIR` for a profile of each storm's daemon;
 * node flags after a build's name add to that build's alone (`this|this --no-opt`: one build
 * against itself under another flag). BENCH_HEAP_DIR=DIR samples each ovsnet build's and the
 * floor's allocations over the storm's starts (bench/heap-sampler.ts) and prints them by owner and
 * function, in bytes per start.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Cluster } from '../test/harness/cluster.js';
import { CREATE_OVSNET, MAIN, Ovsnet, type DockerHost } from '../test/harness/host.js';
import { launchFlags } from '../test/harness/launch.js';
import { fmt, table } from './stats.js';
import { unixGet } from '../src/lib/unix-http.js';
import { driverSocket, startFloorDriver, startNullDriver } from './churn.js';
import { cpuSplit, oneByOne, servePid, storm, threadTimes, type OneByOne } from './storm.js';
import { monotonicUs, topFrames, topOwners, type Window } from './cpu-profile.js';
import { allocationFrames, allocationOwners, type Allocations } from './heap-profile.js';

const IDLE_S = 10;
const HEAP_DIR = process.env.BENCH_HEAP_DIR;
const SAMPLER = new URL('./heap-sampler.js', import.meta.url);
const EXTRA_FLAGS = [
  ...(process.env.BENCH_DAEMON_FLAGS?.split(' ').filter(Boolean) ?? []),
  ...(HEAP_DIR === undefined ? [] : [`--import=${SAMPLER.href}?dir=${encodeURIComponent(HEAP_DIR)}`]),
];
/** Containers started and removed before the storm (BENCH_WARM), at once: the daemon's code warm. */
const WARM = Number(process.env.BENCH_WARM ?? 20);
/** Containers started one after another, then removed so, before the storm (BENCH_ONE; 0: none). */
const ONE = Number(process.env.BENCH_ONE ?? 20);

interface Figures {
  /** CPU ms per start, all threads (user + system); of it system, and the main thread's. */
  readonly start: number;
  readonly system: number;
  readonly main: number;
  /** The same with the idle rate over the starts' time taken off. */
  readonly net: number;
  readonly stop: number;
  /** CPU ms per start over the warm-up's 20, the daemon's code cold (the figures above are after it). */
  readonly cold: number;
  readonly wallS: number;
  readonly failures: number;
  readonly load: string;
  /** CPU ms per start by thread (threadTimes: 0 the main thread), the five busiest, over the storm's starts. */
  readonly threads: string;
  /** The storm's starts on the monotonic clock, for a profile's samples (BENCH_DAEMON_FLAGS). */
  readonly window: Window;
  /** Bytes allocated over the storm's starts by frame (BENCH_HEAP_DIR). */
  readonly allocations: Allocations | undefined;
  /** BENCH_ONE containers one at a time before the storm, and the idle rate (ms per s) around them. */
  readonly one: (OneByOne & { readonly idleRate: number }) | undefined;
}

/** The sampler's file for `pid`'s last window, once written (it stops the profiler first). */
async function readAllocations(pid: number): Promise<Allocations | undefined> {
  for (let i = 0; i < 100; i++) {
    const file = fs
      .readdirSync(HEAP_DIR ?? '')
      .filter((f) => f.startsWith(`heap-${pid}-`) && f.endsWith('.json'))
      .sort()
      .pop();
    if (file !== undefined) return JSON.parse(fs.readFileSync(path.join(HEAP_DIR ?? '', file), 'utf8')) as Allocations;
    await sleep(100);
  }
  console.log(`no allocations written by ${pid} in ${HEAP_DIR ?? ''}`);
  return undefined;
}

/** Makes the network; the plugin stopped when it cannot (the caller never sees it to stop). */
async function withNetwork(plugin: Ovsnet, create: () => Promise<unknown>): Promise<void> {
  try {
    await create();
  } catch (err) {
    await plugin.kill('SIGTERM').catch(() => undefined);
    throw err;
  }
}

/** `which` started on `host`: its network made (`net`), its process to measure. */
async function startBuild(host: DockerHost, cluster: Cluster, entry: string, round: number): Promise<{ plugin: Ovsnet; net: string }> {
  const [which = '', ...ownFlags] = entry.split(' ').filter(Boolean);
  const flags = [...EXTRA_FLAGS, ...ownFlags];
  if (which === 'floor') {
    const plugin = await startFloorDriver(host, cluster.store, flags);
    await withNetwork(plugin, () =>
      host.dockerOk(['network', 'create', '-d', 'floornet', '--ipam-driver', 'floornet', '--subnet', '10.230.0.0/22', 'bench']),
    );
    return { plugin, net: 'bench' };
  }
  if (which === 'null') {
    const plugin = await startNullDriver(host);
    await withNetwork(plugin, () => host.dockerOk(['network', 'create', '-d', 'nullnet', '--subnet', '10.230.0.0/22', 'bench']));
    return { plugin, net: 'bench' };
  }
  const main = which === 'this' ? MAIN : which;
  // A copy of a dist without its plugin/config.json beside it runs without the plugin's node flags:
  // said, since those flags move the figures (a comparison of two builds is one of flags too).
  const shipped = launchFlags(main);
  if (round === 0)
    console.log(
      `${which}: node flags ${[...shipped, ...flags].join(' ') || 'none (no plugin/config.json beside its dist, or none in its entrypoint)'}`,
    );
  const plugin = await host.startOvsnet(
    {
      OVSNET_STORE: cluster.store,
      OVSNET_HOST: 'b1',
      OVSNET_VTEP_IP: cluster.addresses[0] ?? '',
      // The port alone: every build since metrics came reads it so. Not served: empty, which every
      // build reads as unset (leaving it out would keep the harness's default, which serves them).
      OVSNET_METRICS_ADDR: process.env.BENCH_METRICS === '0' ? '' : '9477',
    },
    main,
    [...shipped, ...flags],
  );
  await withNetwork(plugin, () =>
    host.dockerOk([...CREATE_OVSNET, '--subnet', '10.230.0.0/22', '-o', 'ovsnet.network=bench', '-o', 'ovsnet.encap=vxlan', 'bench']),
  );
  return { plugin, net: 'bench' };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const cpuMs = (p: Ovsnet) => {
  const c = cpuSplit(p);
  return { all: (c.user + c.system) * 1000, system: c.system * 1000, main: c.main * 1000, at: performance.now() };
};

/** The daemon's CPU rate (ms per s) over IDLE_S s asked nothing. */
async function idleRate(plugin: Ovsnet): Promise<number> {
  const i0 = cpuMs(plugin);
  await sleep(IDLE_S * 1000);
  const i1 = cpuMs(plugin);
  return (i1.all - i0.all) / ((i1.at - i0.at) / 1000);
}

/**
 * BENCH_ONE containers one at a time, and the idle rate again after them (the daemon's idle work
 * comes in bursts: one window before is not enough to take it off these few starts): the rate
 * given is the mean of the window before and the one after; `after` is the one after, which is
 * just before the storm.
 */
async function oneAtATime(plugin: Ovsnet, host: DockerHost, net: string, prefix: string, before: number) {
  const one = await oneByOne(host, net, ONE, prefix, () => cpuMs(plugin).all);
  await sleep(5000); // the last removal's tail
  const after = await idleRate(plugin);
  return { one: { ...one, idleRate: (before + after) / 2 }, after };
}

/** One storm of `which` on a cluster of its own. */
async function measure(which: string, n: number, round: number): Promise<Figures> {
  const cluster = await Cluster.up('bld', 1);
  let plugin: Ovsnet | undefined;
  try {
    const host = cluster.hosts[0] as DockerHost;
    const started = await startBuild(host, cluster, which, round);
    plugin = started.plugin;
    const w0 = cpuMs(plugin);
    let w1 = w0;
    const warm = await storm(host, started.net, WARM, `w${round}x`, () => {
      w1 = cpuMs(plugin as Ovsnet);
      return Promise.resolve();
    });
    if (warm.failures > 0) throw new Error(`${which}: the warm-up failed: ${warm.firstError ?? ''}`);
    await sleep(5000); // the removals' tail (spares parked, records swept)
    const before = await idleRate(plugin);
    const phase = ONE > 0 ? await oneAtATime(plugin, host, started.net, `o${round}x`, before) : undefined;
    const one = phase?.one;
    const stormIdle = phase?.after ?? before; // the window just before the storm
    if (one !== undefined && one.failures > 0) throw new Error(`${which}: ${one.failures} of the ${ONE} one-at-a-time starts failed`);
    const c0 = cpuMs(plugin);
    const t0 = threadTimes(plugin);
    let t1 = t0;
    // BENCH_HEAP_DIR: the sampler in the daemon (heap-sampler.ts) starts and stops on SIGUSR2.
    const sampledPid = HEAP_DIR === undefined || which === 'null' ? undefined : servePid(plugin.child.pid ?? 0);
    const sample = () => {
      if (sampledPid !== undefined) process.kill(sampledPid, 'SIGUSR2');
    };
    sample();
    const fromUs = monotonicUs();
    let toUs = fromUs;
    let c1 = c0;
    const s = await storm(host, started.net, n, `s${round}x`, () => {
      c1 = cpuMs(plugin as Ovsnet);
      t1 = threadTimes(plugin as Ovsnet);
      toUs = monotonicUs();
      sample();
      return Promise.resolve();
    });
    const c2 = cpuMs(plugin);
    const allocations = sampledPid === undefined ? undefined : await readAllocations(sampledPid);
    if (which === 'floor') await printFloorCounts(host, n + WARM + ONE);
    return {
      start: (c1.all - c0.all) / n,
      system: (c1.system - c0.system) / n,
      main: (c1.main - c0.main) / n,
      net: (c1.all - c0.all - (stormIdle * (c1.at - c0.at)) / 1000) / n,
      stop: (c2.all - c1.all) / n,
      cold: (w1.all - w0.all) / WARM,
      wallS: s.wallMs / 1000,
      failures: s.failures,
      load: os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(' '),
      threads: [...t1.entries()]
        .map(([t, s1]) => [t, ((s1 - (t0.get(t) ?? 0)) * 1000) / n] as const)
        .sort((a, b) => b[1] - a[1])
        .slice(0, 5)
        .map(([t, ms]) => `${t}: ${fmt(ms, 1)}`)
        .join(', '),
      window: { fromUs, toUs },
      allocations,
      one,
    };
  } finally {
    await plugin?.kill('SIGTERM').catch(() => undefined);
    await cluster.down();
  }
}

/** What the floor driver did per container (warm-up and storm, started and removed): its work is checked, not assumed. */
async function printFloorCounts(host: DockerHost, containers: number): Promise<void> {
  const body = (await unixGet(driverSocket(host, 'floornet'), '/counts', 5000))?.body ?? '{}';
  const c = JSON.parse(body) as { transactions?: number; watched?: number; ovsdb?: number };
  const per = (x: number | undefined) => fmt((x ?? 0) / containers, 2);
  console.log(
    `floor, per container (${containers}, started and removed): store transactions ${per(c.transactions)}, watch events ${per(c.watched)}, OVSDB requests ${per(c.ovsdb)}`,
  );
}

/**
 * With `--cpu-prof-dir=DIR` in BENCH_DAEMON_FLAGS: the storm's starts in the profile of the
 * daemon's main thread (thread 0 in the file's name) written since `began`, by owner and by
 * function, each also in ms per start (`n` starts).
 */
function printProfile(label: string, began: number, window: Window, n: number): void {
  const dir = EXTRA_FLAGS.find((f) => f.startsWith('--cpu-prof-dir='))?.slice('--cpu-prof-dir='.length);
  if (dir === undefined) return;
  const file = fs
    .readdirSync(dir)
    .filter((f) => /\.\d+\.0\.\d+\.cpuprofile$/.test(f))
    .map((f) => path.join(dir, f))
    .find((f) => fs.statSync(f).mtimeMs >= began);
  if (file === undefined) return console.log(`${label}: no profile of a main thread written in ${dir}`);
  const perStart = (rows: string[][]) => rows.map(([pct = '', ms = '', ...rest]) => [pct, ms, fmt(Number(ms) / n, 2), ...rest]);
  console.log(
    `\n${label}: the storm's starts (CLOCK_MONOTONIC ${window.fromUs}-${window.toUs} µs) in ${file}, the daemon's main thread, busy time by owner:\n`,
  );
  console.log(table(['self % of busy', 'self ms', 'per start', 'owner'], perStart(topOwners(file, window))));
  console.log(table(['self % of busy', 'self ms', 'per start', 'function', 'where'], perStart(topFrames(file, 40, window))));
}

export async function benchBuilds(): Promise<void> {
  const builds = (process.env.BENCH_BUILDS ?? 'this').split('|').map((b) => b.trim());
  for (const entry of builds) {
    const [b = '', ...flags] = entry.split(' ').filter(Boolean);
    if (b !== 'this' && b !== 'null' && b !== 'floor' && !fs.existsSync(b))
      throw new Error(`BENCH_BUILDS: ${b} is not a file: give a build's dist/src/main.js, this, floor or null`);
    if (b === 'null' && flags.length > 0) throw new Error(`BENCH_BUILDS: the null driver takes no node flags (${entry})`);
  }
  if (new Set(builds).size !== builds.length)
    throw new Error(`BENCH_BUILDS: an entry is named twice (${builds.join(' | ')}): each entry is one column`);
  const n = Number(process.env.BENCH_STORM ?? 100);
  const rounds = Number(process.env.BENCH_STORM_ROUNDS ?? 2);
  const all = new Map<string, Figures[]>(builds.map((b) => [b, []]));
  const rows: string[][] = [];
  for (let r = 0; r < rounds; r++) {
    let base: Figures | undefined;
    for (const [k, b] of builds.entries()) {
      const began = Date.now();
      const f = await measure(b, n, r);
      all.get(b)?.push(f);
      if (b !== 'null') printProfile(`${b}, round ${r + 1}`, began, f.window, n);
      if (f.allocations !== undefined) {
        console.log(
          `\n${b}, round ${r + 1}: bytes allocated per start over the storm's starts, by owner and by function (V8's sampling estimate):\n`,
        );
        console.log(table(['bytes', '%', 'owner'], allocationOwners(f.allocations, n)));
        console.log(table(['bytes', '%', 'function', 'where'], allocationFrames(f.allocations, n, 40)));
      }
      if (k === 0) base = f;
      rows.push([
        `${b}${k === 0 ? ' [baseline]' : ''}`,
        String(r + 1),
        `${fmt(f.start)} (system ${fmt(f.system)}, main thread ${fmt(f.main)})`,
        fmt(f.net),
        base === undefined ? '' : `${fmt(f.start / base.start)}x (${fmt(f.net / base.net)}x)`,
        fmt(f.stop),
        fmt(f.cold),
        `${fmt(f.wallS, 1)} s`,
        String(f.failures),
        f.load,
      ]);
    }
  }
  const metrics = process.env.BENCH_METRICS === '0' ? 'not served' : 'served';
  // V8's profiler samples from a thread of its own, asked nothing or not (about 190 ms of CPU a
  // second at a 0.25 ms interval, measured): in every /proc figure below and in the idle rate.
  if (EXTRA_FLAGS.includes('--cpu-prof'))
    console.log(
      `\nUnder --cpu-prof: each daemon's figures below hold its profiler's sampling thread as well (it runs asked nothing or not): read the profiles' shares above, not these figures, nor one build's against another's.`,
    );
  console.log(
    `\n${n}-container storms on a logical network (etcd), each on a cluster of its own (one host, an empty etcd), ${rounds} rounds in turn; ovsnet's metrics ${metrics}; CPU ms per container from /proc (all threads), idle rate over ${IDLE_S} s before:\n`,
  );
  console.log(
    table(
      [
        'build',
        'round',
        'CPU per start',
        'idle taken off',
        'vs baseline (idle off)',
        'CPU per stop',
        `per start, first ${WARM} (cold)`,
        'storm wall',
        'failures',
        'load 1/5/15',
      ],
      rows,
    ),
  );
  console.log(
    "\nCPU ms per start by thread, the five busiest (thread ID less the process ID: 0 the main thread, 1-4 V8's platform threads):",
  );
  for (const [b, fs_] of all) fs_.forEach((f, r) => console.log(`  ${b}, round ${r + 1}: ${f.threads}`));
  if (ONE > 0) printOneByOne(builds, all);
  // Each round's build against that round's baseline (paired: the machine's load moves between rounds).
  const first = all.get(builds[0] ?? '') ?? [];
  const range = (xs: readonly number[]) => `${fmt(Math.min(...xs))}-${fmt(Math.max(...xs))}`;
  for (const b of builds.slice(1)) {
    const fs_ = all.get(b) ?? [];
    const vs = (f: (x: Figures) => number) => fs_.map((x, r) => `${fmt(f(x) / f(first[r] as Figures))}x`).join(', ');
    const per = `idle taken off ${vs((x) => x.net)}; cold ${vs((x) => x.cold)}; per stop ${vs((x) => x.stop)}`;
    console.log(`${b}: CPU per start ${range(fs_.map((x) => x.start))} ms; each round against its baseline ${vs((x) => x.start)} (${per})`);
  }
}

/** The one-at-a-time figures, each round's build against that round's baseline. */
function printOneByOne(builds: readonly string[], all: ReadonlyMap<string, readonly Figures[]>): void {
  type One = NonNullable<Figures['one']>;
  const first = all.get(builds[0] ?? '') ?? [];
  const idleOff = (o: One, p: One['start']) => p.cpu - (o.idleRate * p.wall) / 1000;
  const rows = builds.flatMap((b, k) =>
    (all.get(b) ?? []).map((f, r) => {
      const o = f.one as One;
      const base = first[r]?.one as One;
      return [
        `${b}${k === 0 ? ' [baseline]' : ''}`,
        String(r + 1),
        `${fmt(o.start.cpu)}: ${fmt(o.start.cpu / base.start.cpu)}x`,
        `${fmt(idleOff(o, o.start))}: ${fmt(idleOff(o, o.start) / idleOff(base, base.start))}x`,
        `${fmt(o.stop.cpu)}: ${fmt(o.stop.cpu / base.stop.cpu)}x`,
        `${fmt(idleOff(o, o.stop))}: ${fmt(idleOff(o, o.stop) / idleOff(base, base.stop))}x`,
        fmt(o.idleRate, 1),
        `${fmt(o.start.wall, 0)} ms`,
      ];
    }),
  );
  console.log(
    `\n${ONE} containers one at a time before each storm (each \`docker run -d\` waited for, then each removed so; the machine otherwise idle), CPU ms per container from /proc (all threads), against the round's baseline; the idle rate is the mean of ${IDLE_S} s asked nothing before and after:\n`,
  );
  console.log(
    table(
      ['build', 'round', 'CPU per start', 'idle taken off', 'CPU per stop', 'idle taken off', 'idle rate, ms/s', 'docker run wall, mean'],
      rows,
    ),
  );
}
