/**
 * What `npm run bench -- policy` reads off its simulated host: ovsnet's OpenFlow flows on the
 * bridge, the Join durations ovsnet logs, and the wall time of one `ovsnet` CLI command.
 */
import os from 'node:os';
import { OWN, scopeArg } from '../src/driver/ovs/cookies.js';
import { MAIN, type DockerHost, type Ovsnet } from '../test/harness/host.js';

/** How many flows on ovsnet's bridge carry one of ovsnet's cookies. */
export async function ownFlows(host: DockerHost): Promise<number> {
  const r = await host.exec(['ovs-ofctl', '-O', 'OpenFlow13', 'dump-flows', 'ovsnet0', scopeArg(OWN)]);
  if (r.code !== 0) throw new Error(`ovs-ofctl dump-flows ovsnet0 failed (${r.code}): ${r.stderr}`);
  return r.stdout.split('\n').filter((l) => l.includes('cookie=')).length;
}

/**
 * Waits until ovs-vswitchd serves ovsnet's bridge (ovsnet makes it after its start, in the
 * background), at most 10 s.
 */
export async function bridgeReady(host: DockerHost): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if ((await host.exec(['ovs-ofctl', '-O', 'OpenFlow13', 'dump-flows', 'ovsnet0'])).code === 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("ovsnet's bridge ovsnet0 was not served by ovs-vswitchd 10 s after ovsnet started");
}

/**
 * The flow count once it holds still: ovsnet may finish a change (a group's rules, a sync) just
 * after Docker's call returns, so it is read every 300 ms until two reads agree (at most 5 s).
 */
export async function settledFlows(host: DockerHost): Promise<number> {
  let last = await ownFlows(host);
  for (let i = 0; i < 16; i++) {
    await new Promise((r) => setTimeout(r, 300));
    const now = await ownFlows(host);
    if (now === last) return now;
    last = now;
  }
  return last;
}

/**
 * Durations (ms) of NetworkDriver.Join calls ovsnet logged after `offset` characters of its log
 * (server.ts's `docker call` line, at OVSNET_LOG_LEVEL=info): the handler's own time, from
 * request to answer.
 */
export function joinsLoggedSince(ovsnet: Ovsnet, offset: number): number[] {
  const lines = ovsnet.log.slice(offset).split('\n');
  return lines
    .filter((l) => l.includes('"method":"NetworkDriver.Join"') && l.includes('"msg":"docker call"'))
    .map((l) => Number(/"ms":([\d.]+)/.exec(l)?.[1]))
    .filter((ms) => Number.isFinite(ms));
}

/** Runs `ovsnet ARGS...` inside the host, as an operator would there; its wall time and output. */
export async function timeCli(host: DockerHost, args: readonly string[]): Promise<{ ms: number; stdout: string }> {
  const t0 = process.hrtime.bigint();
  const r = await host.exec(['env', 'OVSNET_STORE=sqlite:/run/ovsnet/state.db', process.execPath, MAIN, ...args]);
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (r.code !== 0) throw new Error(`ovsnet ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
  return { ms, stdout: r.stdout };
}

export const loadAverage = (): string =>
  `${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')} on ${os.cpus().length} cores`;
