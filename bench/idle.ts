/**
 * Idle benchmark: what an ovsnet asked nothing costs, in CPU per second, on a simulated host
 * (test/harness, embedded store, one network, no container): with its metrics served
 * (OVSNET_METRICS_ADDR, as the other benches run it) and not (the default). Its main thread
 * apart from its other threads (the link worker, V8's and libuv's) and from the child processes
 * it ran (the periodic flow checks' ovs-ofctl). Baseline: a bare Node process with the same
 * flags, measured over the same windows. BENCH_BASELINE_MAIN=DIR/dist/src/main.js measures an
 * earlier build the same way, alternated with this one; BENCH_IDLE_S (20) seconds a window,
 * BENCH_IDLE_ROUNDS (2) rounds.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { DockerHost, MAIN } from '../test/harness/host.js';
import { launchFlags } from '../test/harness/launch.js';
import { servePid } from './storm.js';
import { fmt, median, table } from './stats.js';

const TICK_MS = 1000 / 100; // USER_HZ

interface Cpu {
  readonly main: number;
  readonly threads: number;
  readonly children: number;
}

/** CPU ms so far of `pid`'s main thread, its other threads, and its reaped children. */
function cpuOf(pid: number): Cpu {
  const fields = (stat: string) =>
    stat
      .slice(stat.lastIndexOf(')') + 2)
      .split(' ')
      .map(Number);
  let main = 0;
  let threads = 0;
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    const f = fields(fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8'));
    const ms = ((f[11] ?? 0) + (f[12] ?? 0)) * TICK_MS;
    if (tid === String(pid)) main += ms;
    else threads += ms;
  }
  const own = fields(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  return { main, threads, children: ((own[13] ?? 0) + (own[14] ?? 0)) * TICK_MS };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** ms of CPU per second over `seconds`, of the daemon and of a bare Node process beside it. */
async function window(pid: number, bare: number, seconds: number): Promise<{ daemon: Cpu; bare: number }> {
  const [d0, b0] = [cpuOf(pid), cpuOf(bare)];
  await sleep(seconds * 1000);
  const [d1, b1] = [cpuOf(pid), cpuOf(bare)];
  const per = (a: number, b: number) => (b - a) / seconds;
  return {
    daemon: { main: per(d0.main, d1.main), threads: per(d0.threads, d1.threads), children: per(d0.children, d1.children) },
    bare: per(b0.main + b0.threads, b1.main + b1.threads),
  };
}

export async function benchIdle(): Promise<void> {
  const seconds = Number(process.env.BENCH_IDLE_S ?? 20);
  const rounds = Number(process.env.BENCH_IDLE_ROUNDS ?? 2);
  const builds = [
    ...(process.env.BENCH_BASELINE_MAIN === undefined ? [] : [{ label: 'baseline build', main: process.env.BENCH_BASELINE_MAIN }]),
    { label: 'this build', main: MAIN },
  ];
  const host = await DockerHost.up('benchidle');
  const flags = launchFlags(MAIN);
  const bare = spawn(process.execPath, [...flags, '-e', 'setInterval(() => {}, 1 << 30)'], { stdio: 'ignore' });
  const results = new Map<string, { daemon: Cpu; bare: number }[]>();
  try {
    for (let r = 0; r < rounds; r++)
      for (const build of builds)
        for (const metrics of [true, false]) {
          const ovsnet = await host.startOvsnet(metrics ? {} : { OVSNET_METRICS_ADDR: '' }, build.main, launchFlags(build.main));
          try {
            // A network of its own (its flows, its bridge port) as a host in use has; then start-up's
            // reconcile and its collection settle.
            await host.dockerOk(['network', 'create', '-d', 'ovsnet', '--ipam-driver', 'ovsnet', '--subnet', '10.246.0.0/24', 'idlenet']);
            await sleep(5000);
            const key = `${build.label}, metrics ${metrics ? 'served' : 'off (the default)'}`;
            results.set(key, [...(results.get(key) ?? []), await window(servePid(ovsnet.child.pid ?? 0), bare.pid ?? 0, seconds)]);
            await host.dockerOk(['network', 'rm', 'idlenet']);
          } finally {
            await ovsnet.kill('SIGTERM');
          }
        }
  } finally {
    bare.kill();
    await host.down();
  }
  const rows = [...results].map(([key, ws]) => {
    const m = (f: (w: { daemon: Cpu; bare: number }) => number) =>
      ws
        .map(f)
        .map((x) => fmt(x, 1))
        .join(' / ');
    const total = median(ws.map((w) => w.daemon.main + w.daemon.threads + w.daemon.children));
    return [key, m((w) => w.daemon.main), m((w) => w.daemon.threads), m((w) => w.daemon.children), fmt(total, 1), m((w) => w.bare)];
  });
  console.log(
    [
      `ovsnet asked nothing (one network, no container, embedded store), CPU ms per second over ${seconds} s windows, each round's figure; baseline: a bare Node process with the daemon's flags over the same windows\n`,
      table(['daemon', 'main thread', 'other threads', 'child processes', 'total (median)', 'bare Node [baseline]'], rows),
    ].join('\n'),
  );
}
