/**
 * Container storms for the churn and cluster benchmarks: `n` parallel `docker run -d` on one
 * host, timed; and what one ovsnet spent meanwhile (CPU from /proc, store calls and event-loop
 * delay from /metrics).
 */
import fs from 'node:fs';
import { IMAGE, type DockerHost, type Ovsnet } from '../test/harness/host.js';

export interface Storm {
  readonly wallMs: number;
  readonly failures: number;
  /** The first failure's message, if any. */
  readonly firstError?: string;
}

/** One container's `docker run -d` on `network`: it sleeps, so it stays up until removed. */
const runArgs = (name: string, network: string) => ['run', '-d', '--name', name, '--network', network, IMAGE, 'sleep', '600'];

/**
 * `n` parallel `docker run -d` on `network`, then `afterStart`, then every container removed (not
 * timed). Each docker command is bounded (3 min): dockerd 20.10 can deadlock under such cycling
 * (libnetwork's processEndpointDelete against getSvcRecords, moby/moby#42545), and a storm that
 * hangs is reported as failures, not waited for.
 */
export async function storm(
  host: DockerHost,
  network: string,
  n: number,
  prefix: string,
  afterStart?: () => Promise<void>,
): Promise<Storm> {
  const names = Array.from({ length: n }, (_, i) => `${prefix}${i}`);
  const t0 = process.hrtime.bigint();
  const runs = await Promise.all(names.map((name) => host.docker(runArgs(name, network), 180_000)));
  const wallMs = Number(process.hrtime.bigint() - t0) / 1e6;
  await afterStart?.();
  await host.docker(['rm', '-f', ...names], 180_000);
  const failed = runs.filter((r) => r.code !== 0);
  return { wallMs, failures: failed.length, ...(failed[0] === undefined ? {} : { firstError: failed[0].stderr.trim() }) };
}

/** What `oneByOne` measured, per container: ms of `cpu` and of wall time, starting and removing. */
export interface OneByOne {
  readonly start: { readonly cpu: number; readonly wall: number };
  readonly stop: { readonly cpu: number; readonly wall: number };
  readonly failures: number;
}

/**
 * `n` `docker run -d` on `network` one after another, each waited for, then each removed the same
 * way: what a user starting containers by hand or a test harness does, the machine otherwise idle.
 * `cpu()` (ms) is read around each phase.
 */
export async function oneByOne(host: DockerHost, network: string, n: number, prefix: string, cpu: () => number): Promise<OneByOne> {
  const names = Array.from({ length: n }, (_, i) => `${prefix}${i}`);
  let failures = 0;
  const phase = async (each: (name: string) => Promise<{ code: number | null }>) => {
    const c0 = cpu();
    const t0 = performance.now();
    for (const name of names) if ((await each(name)).code !== 0) failures++;
    return { cpu: (cpu() - c0) / n, wall: (performance.now() - t0) / n };
  };
  const start = await phase((name) => host.docker(runArgs(name, network), 180_000));
  const stop = await phase((name) => host.docker(['rm', '-f', name], 180_000));
  return { start, stop, failures };
}

/** CPU seconds (user + system) the ovsnet process has used so far, from /proc/<pid>/stat. */
export function cpuSeconds(ovsnet: Ovsnet): number {
  const { user, system } = cpuSplit(ovsnet);
  return user + system;
}

/**
 * The same, user and system apart: system time is the kernel's work done in ovsnet's threads
 * (a netlink request is carried out inside the sending call: a veth pair's creation is ovsnet's
 * system time, as it is dockerd's for Docker's bridge driver). `main` is the main thread's own
 * (user + system; /proc/<pid>/task/<pid>/stat): the rest is the link worker's, V8's (its
 * collector's helpers, its background compiler) and libuv's threads'.
 */
export function cpuSplit(ovsnet: Ovsnet): { user: number; system: number; main: number } {
  const pid = servePid(ovsnet.child.pid ?? 0);
  const all = statTimes(`/proc/${pid}/stat`);
  const main = statTimes(`/proc/${pid}/task/${pid}/stat`);
  return { ...all, main: main.user + main.system };
}

/**
 * Each thread's CPU (user + system, seconds) by its ID less the process's: 0 is the main thread,
 * 1-4 V8's platform threads in Node 20; libuv's pool and worker threads come later, in the order
 * they start. A thread that has ended is gone from the map (its time stays in cpuSplit's totals).
 */
export function threadTimes(ovsnet: Ovsnet): Map<number, number> {
  const pid = servePid(ovsnet.child.pid ?? 0);
  const out = new Map<number, number>();
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      const t = statTimes(`/proc/${pid}/task/${tid}/stat`);
      out.set(Number(tid) - pid, t.user + t.system);
    } catch {
      // ended between the listing and the read
    }
  }
  return out;
}

/** utime and stime of a /proc stat file, in seconds. */
function statTimes(file: string): { user: number; system: number } {
  const stat = fs.readFileSync(file, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // Fields 14 and 15 of the whole line (utime, stime) are 12 and 13 after "pid (comm) ".
  return { user: Number(fields[11]) / 100, system: Number(fields[12]) / 100 }; // USER_HZ is 100 on Linux
}

/** The resident memory of the `ovsnet serve` process (or the null driver), MiB. */
export function rssMiB(ovsnet: Ovsnet): number {
  return rssOf(servePid(ovsnet.child.pid ?? 0)).rss;
}

/**
 * A process's resident memory, MiB, and of it the file-backed part: pages of the node binary
 * and its libraries, shared with every other process mapping them and given back to the page
 * cache under pressure (RssFile); the rest is the process's own (RssAnon, RssShmem).
 */
export function rssOf(pid: number | 'self'): { rss: number; file: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1]) / 1024;
  return { rss: kb('VmRSS'), file: kb('RssFile') };
}

/** The `ovsnet serve` process: `pid` itself, or its child when started through a wrapper that forks. */
export function servePid(pid: number): number {
  const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  if (cmd.includes('serve')) return pid;
  const children = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(' ').filter(Boolean);
  for (const c of children) {
    try {
      return servePid(Number(c));
    } catch {
      // not under this one
    }
  }
  throw new Error(`no ovsnet serve process under pid ${pid}`);
}

/** ovsnet's /metrics text, read from inside the host (each scrape also starts a new event-loop window: loop-delay.ts). */
export async function scrape(host: DockerHost, port: number): Promise<string> {
  return (await host.exec(['wget', '-q', '-O', '-', '-T', '5', `http://127.0.0.1:${port}/metrics`])).stdout;
}

/** Store round trips ovsnet made so far (get, range, list, txn: not watches or lease keep-alives), from a scrape. */
export function storeCalls(metricsText: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of metricsText.matchAll(/^ovsnet_store_request_duration_seconds_count\{op="(\w+)",outcome="\w+"\} (\d+)/gm)) {
    const op = m[1] ?? '';
    if (['get', 'range', 'list', 'txn'].includes(op)) out[op] = (out[op] ?? 0) + Number(m[2]);
  }
  return out;
}

/** Child processes ovsnet ran so far, by program (its ovsnet_exec_seconds counts), from a scrape. */
export function execCalls(metricsText: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of metricsText.matchAll(/^ovsnet_exec_seconds_count\{program="([^"]+)"\} (\d+)/gm)) out[m[1] ?? ''] = Number(m[2]);
  return out;
}

/** Docker's calls ovsnet answered so far, by method (its ovsnet_docker_call_duration_seconds counts), from a scrape. */
export function dockerCalls(metricsText: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of metricsText.matchAll(/^ovsnet_docker_call_duration_seconds_count\{method="[A-Za-z]+\.([A-Za-z]+)",code="\d+"\} (\d+)/gm))
    out[m[1] ?? ''] = (out[m[1] ?? ''] ?? 0) + Number(m[2]);
  return out;
}

/** Round trips to ovsdb-server so far, by JSON-RPC method (its ovsnet_ovsdb_request_duration_seconds counts), from a scrape. */
export function ovsdbCalls(metricsText: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of metricsText.matchAll(/^ovsnet_ovsdb_request_duration_seconds_count\{method="([^"]+)",outcome="\w+"\} (\d+)/gm))
    out[m[1] ?? ''] = (out[m[1] ?? ''] ?? 0) + Number(m[2]);
  return out;
}

export const callsBetween = (before: Record<string, number>, after: Record<string, number>): number =>
  Object.keys(after).reduce((s, k) => s + (after[k] ?? 0) - (before[k] ?? 0), 0);
