/**
 * `npm run bench -- policy`: what policy costs, on one simulated host (its own dockerd and Open
 * vSwitch, userspace datapath) in one run, for a plain ovsnet network (the baseline), endpoint
 * groups (`db` allows `web` on one port), a network with 100 egress rules and one with a single
 * egress rule (bench/policy-conditions.ts):
 *
 * 1. Join: `docker run -d` wall time and ovsnet's own Join handler time (its logged `docker
 *    call` duration), BENCH_N containers per condition (default 20) in two passes of half each,
 *    the conditions in order then in reverse (a load that drifts weighs on each alike), back to
 *    back; the first 2 of each condition are warm-up, and the figure with them is printed too.
 * 2. Flows: ovsnet's OpenFlow flows on the bridge (its cookie space) added by each condition's
 *    networks, by its first container (a network's own flows may wait for one), and per further
 *    container (after minus before a pass's containers, divided by their number).
 * 3. TCP throughput container to container (test/harness/throughput.ts: dd into nc, the sink
 *    counting from 1 s to 6 s), and to a sink of the host on the gateway's address, the one
 *    outside destination the egress rules allow; BENCH_REPS rounds (default 3), conditions in turn.
 * 4. `ovsnet trace` wall time, sender to receiver, BENCH_TRACES times each (default 10), beside
 *    `ovsnet version` run the same way (the CLI's start alone).
 *
 * Everything is on the one host, which is torn down at the end, on failure and on SIGINT/SIGTERM.
 */
import { DockerHost, IMAGE, type Ovsnet } from '../test/harness/host.js';
import { throughput, throughputTo } from '../test/harness/throughput.js';
import { CONDITIONS, PEER_PORT, containerName, networkOf, type Condition } from './policy-conditions.js';
import { bridgeReady, joinsLoggedSince, loadAverage, settledFlows, timeCli } from './policy-probes.js';
import { fmt, median, percentile, table } from './stats.js';

const WARM_UP = 2;

interface Samples {
  /** `docker run -d` wall times, ms, in the order they ran. */
  readonly run: number[];
  /** ovsnet's Join handler times, ms, in the order they were logged. */
  readonly join: number[];
  /** Flows added per endpoint, one figure per pass. */
  readonly flowsPerEndpoint: number[];
  networkFlows: number;
  /** Flows the first container added (with the network's own flows, when they wait for one). */
  firstEndpointFlows: number;
  readonly toPeer: number[];
  readonly toHost: number[];
  readonly trace: number[];
  verdict: string;
}

const emptySamples = (): Samples => ({
  run: [],
  join: [],
  flowsPerEndpoint: [],
  networkFlows: 0,
  firstEndpointFlows: 0,
  toPeer: [],
  toHost: [],
  trace: [],
  verdict: '',
});

const p = (xs: readonly number[], q: number) =>
  percentile(
    [...xs].sort((a, b) => a - b),
    q,
  );

/** Creates each condition's networks, counting the flows each adds. */
async function createNetworks(host: DockerHost, samples: Map<Condition, Samples>): Promise<void> {
  for (const c of CONDITIONS) {
    const before = await settledFlows(host);
    for (const args of c.creates) await host.dockerOk(args);
    samples.get(c)!.networkFlows = (await settledFlows(host)) - before;
  }
}

/** Starts containers `from` to `from + count - 1` of a condition back to back, timing each. */
async function startContainers(host: DockerHost, ovsnet: Ovsnet, c: Condition, from: number, count: number, s: Samples): Promise<void> {
  let flowsBefore = await settledFlows(host);
  let counted = count;
  const logOffset = ovsnet.log.length;
  for (let i = from; i < from + count; i++) {
    const t0 = process.hrtime.bigint();
    await host.dockerOk(['run', '-d', '--name', containerName(c, i), '--network', networkOf(c, i), IMAGE, 'sleep', '3600']);
    s.run.push(Number(process.hrtime.bigint() - t0) / 1e6);
    if (i === 0) {
      // A network's own flows may come with its first endpoint: counted apart from the rest.
      const now = await settledFlows(host);
      s.firstEndpointFlows = now - flowsBefore;
      [flowsBefore, counted] = [now, count - 1];
    }
  }
  s.flowsPerEndpoint.push(((await settledFlows(host)) - flowsBefore) / counted);
  const joins = joinsLoggedSince(ovsnet, logOffset);
  if (joins.length !== count) throw new Error(`expected ${count} Joins of ${c.label} in ovsnet's log, found ${joins.length}`);
  s.join.push(...joins);
}

async function addressOf(host: DockerHost, c: Condition, i: number): Promise<string> {
  return host.dockerOk(['inspect', '-f', `{{(index .NetworkSettings.Networks "${networkOf(c, i)}").IPAddress}}`, containerName(c, i)]);
}

/** One throughput figure, or NaN with the reason kept: one failed path leaves the others' figures. */
async function mbit(what: string, f: () => Promise<number>, failures: string[]): Promise<number> {
  try {
    return await f();
  } catch (err) {
    failures.push(`${what}: ${err instanceof Error ? err.message : String(err)}`);
    return NaN;
  }
}

async function measureThroughput(host: DockerHost, samples: Map<Condition, Samples>, reps: number, failures: string[]): Promise<void> {
  for (let r = 0; r < reps; r++) {
    for (const c of CONDITIONS) {
      const s = samples.get(c)!;
      const [from, to] = [containerName(c, 0), containerName(c, 1)];
      const peer = await addressOf(host, c, 1);
      s.toPeer.push(await mbit(`${from} -> ${to}`, () => throughputTo(host, from, to, peer, PEER_PORT), failures));
      s.toHost.push(await mbit(`${from} -> host`, () => throughput(host, from, c.gateway, c.hostPort), failures));
    }
  }
}

async function measureTraces(host: DockerHost, samples: Map<Condition, Samples>, n: number): Promise<number[]> {
  const baseline: number[] = [];
  for (let i = 0; i < n; i++) {
    baseline.push((await timeCli(host, ['version'])).ms);
    for (const c of CONDITIONS) {
      const s = samples.get(c)!;
      const r = await timeCli(host, ['trace', containerName(c, 0), `${containerName(c, 1)}:${PEER_PORT}/tcp`, '-o', 'json']);
      s.trace.push(r.ms);
      s.verdict = (JSON.parse(r.stdout) as { verdict?: string }).verdict ?? '(no verdict)';
    }
  }
  return baseline;
}

/** Join samples after the warm-up ones (the first WARM_UP of each condition). */
const steady = (xs: readonly number[]) => xs.slice(WARM_UP);

function joinTable(samples: Map<Condition, Samples>): string {
  const base = samples.get(CONDITIONS[0]!)!;
  const rows = CONDITIONS.map((c) => {
    const s = samples.get(c)!;
    return [
      c.label,
      fmt(p(steady(s.run), 0.5), 0),
      fmt(p(steady(s.run), 0.99), 0),
      `${fmt(p(steady(s.run), 0.5) / p(steady(base.run), 0.5))}x`,
      fmt(p(steady(s.join), 0.5), 1),
      fmt(p(steady(s.join), 0.99), 1),
      `${fmt(p(steady(s.join), 0.5) / p(steady(base.join), 0.5))}x`,
      `${fmt(p(s.run, 0.5), 0)} / ${fmt(p(s.join, 0.5), 1)}`,
    ];
  });
  return table(
    ['condition', 'docker run -d p50 ms', 'p99 ms', 'vs plain', 'ovsnet Join p50 ms', 'p99 ms', 'vs plain', 'with warm-up: run / Join p50'],
    rows,
  );
}

function flowTable(samples: Map<Condition, Samples>): string {
  const base = samples.get(CONDITIONS[0]!)!;
  const rows = CONDITIONS.map((c) => {
    const s = samples.get(c)!;
    const per = median(s.flowsPerEndpoint);
    return [
      c.label,
      String(s.networkFlows),
      String(s.firstEndpointFlows),
      s.flowsPerEndpoint.map((f) => fmt(f, 1)).join(' / '),
      `${per - median(base.flowsPerEndpoint) >= 0 ? '+' : ''}${fmt(per - median(base.flowsPerEndpoint), 1)}`,
    ];
  });
  return table(['condition', 'at network creation', 'with the first container', 'per further container (pass 1 / 2)', 'vs plain'], rows);
}

function throughputTable(samples: Map<Condition, Samples>): string {
  const base = samples.get(CONDITIONS[0]!)!;
  const row = (c: Condition, what: string, xs: readonly number[], baseline: readonly number[]) => [
    c.label,
    what,
    xs.map((x) => fmt(x, 0)).join(' / '),
    fmt(median(xs), 0),
    `${fmt(median(xs) / median(baseline))}x`,
  ];
  const rows = [
    ...CONDITIONS.map((c) =>
      row(c, c.key === 'groups' ? `web -> db:${PEER_PORT} (gateway)` : 'same network', samples.get(c)!.toPeer, base.toPeer),
    ),
    ...CONDITIONS.map((c) => row(c, `to the host ${c.gateway}:${c.hostPort}`, samples.get(c)!.toHost, base.toHost)),
  ];
  return table(['condition', 'container 0 to', 'Mbit/s per round', 'median', 'vs plain'], rows);
}

function traceTable(samples: Map<Condition, Samples>, baseline: readonly number[]): string {
  const base = samples.get(CONDITIONS[0]!)!;
  const rows = [
    [
      '`ovsnet version` (the CLI start alone)',
      '',
      fmt(p(baseline, 0.5), 0),
      fmt(Math.max(...baseline), 0),
      `${fmt(p(baseline, 0.5) / p(base.trace, 0.5))}x`,
    ],
    ...CONDITIONS.map((c) => {
      const s = samples.get(c)!;
      return [
        c.label,
        s.verdict.slice(0, 100),
        fmt(p(s.trace, 0.5), 0),
        fmt(Math.max(...s.trace), 0),
        `${fmt(p(s.trace, 0.5) / p(base.trace, 0.5))}x`,
      ];
    }),
  ];
  return table(['condition', 'verdict (container 0 to container 1)', 'p50 ms', 'max ms', 'vs plain'], rows);
}

function print(
  samples: Map<Condition, Samples>,
  o: { n: number; traces: number; baseline: number[]; failures: string[]; loads: string[] },
) {
  console.log(`load average (1, 5, 15 min) ${o.loads.join(', then ')}\n`);
  console.log(
    `Join: ${o.n} containers per condition, two passes (in order, then reversed), back to back; first ${WARM_UP} of each are warm-up`,
  );
  console.log(joinTable(samples));
  console.log(`\nOpenFlow flows on the bridge in ovsnet's cookie space`);
  console.log(flowTable(samples));
  console.log(`\nTCP throughput from container 0 (dd | nc), counted by the receiver from 1 s to 6 s`);
  console.log(throughputTable(samples));
  for (const f of o.failures) console.log(`  failed: ${f}`);
  console.log(`\n\`ovsnet trace CONTAINER-0 CONTAINER-1:${PEER_PORT}/tcp -o json\` wall time inside the host, ${o.traces} runs each`);
  console.log(traceTable(samples, o.baseline));
}

export async function benchPolicy(): Promise<void> {
  const n = Number(process.env.BENCH_N ?? 20);
  const reps = Number(process.env.BENCH_REPS ?? 3);
  const traces = Number(process.env.BENCH_TRACES ?? 10);
  if (!Number.isInteger(n) || n < 2 * (WARM_UP + 1) || n % 2 !== 0) {
    throw new Error(`BENCH_N=${process.env.BENCH_N}: expected an even number of containers per condition, at least ${2 * (WARM_UP + 1)}`);
  }
  const loads = [loadAverage()];
  let host: DockerHost | undefined;
  let ovsnet: Ovsnet | undefined;
  let cleaned: Promise<void> | undefined;
  const cleanup = () =>
    (cleaned ??= (async () => {
      await host?.down();
      await ovsnet?.kill('SIGTERM');
    })());
  const onSignal = () => void cleanup().finally(() => process.exit(130));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    host = await DockerHost.up('benchpol');
    ovsnet = await host.startOvsnet({ OVSNET_LOG_LEVEL: 'info' });
    await bridgeReady(host);
    const samples = new Map(CONDITIONS.map((c) => [c, emptySamples()]));
    await createNetworks(host, samples);
    for (const [pass, order] of [CONDITIONS, [...CONDITIONS].reverse()].entries()) {
      for (const c of order) await startContainers(host, ovsnet, c, (pass * n) / 2, n / 2, samples.get(c)!);
    }
    const failures: string[] = [];
    await measureThroughput(host, samples, reps, failures);
    const baseline = await measureTraces(host, samples, traces);
    loads.push(loadAverage());
    print(samples, { n, traces, baseline, failures, loads });
  } finally {
    await cleanup();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
