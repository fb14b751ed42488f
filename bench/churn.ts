/**
 * Churn benchmark, on a simulated host (test/harness), embedded store: a container's driver
 * calls over the plugin socket (bench/driver-calls.ts) with endpoints 40 ms apart and back to
 * back (as a CI runner or `docker compose up --scale` makes them), each with spare veths off
 * (OVSNET_SPARE_VETHS=0: every DeleteEndpoint deletes its veth, and the kernel's RCU grace
 * period under its link lock delays the next Join) and on (the default: a released pair is kept
 * and renamed for the next Join). Baseline: the first row (no spares, spaced), same run.
 * Then container storms and `docker run --rm` against a bridge and `none` (dockerRuns), with
 * ovsnet's event-loop delay idle and over its storms (loop-delay.ts); the storms also on the
 * floor of any remote driver (null-driver.ts).
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DockerHost, IMAGE, MAIN, Ovsnet } from '../test/harness/host.js';
import { launchFlags } from '../test/harness/launch.js';
import { unixGet } from '../src/lib/unix-http.js';
import { cpuSeconds, cpuSplit, rssMiB, scrape, storm, type Storm } from './storm.js';
import { LOOP_HEADERS, LoopProbe, loopDelay, loopRow } from './loop-delay.js';
import { timeDriverCalls } from './driver-calls.js';
import { fmt, percentile, table } from './stats.js';

/** Where test/harness/host.ts's startOvsnet serves ovsnet's metrics. */
const METRICS_PORT = 9477;

export async function benchChurn(): Promise<void> {
  const host = await DockerHost.up('benchchurn');
  const n = Number(process.env.BENCH_N ?? 150);
  const rows: string[][] = [];
  let base = NaN;
  const verdicts: string[] = [];
  let docker = '';
  try {
    let octet = 240;
    for (const spares of ['0', '16']) {
      const ovsnet = await host.startOvsnet({ OVSNET_SPARE_VETHS: spares });
      try {
        for (const gapMs of [40, 0]) {
          const calls = await timeDriverCalls(host, n, octet++, gapMs);
          const join = calls.get('NetworkDriver.Join') ?? [];
          const del = calls.get('Leave + DeleteEndpoint') ?? [];
          const rt = calls.get('NetworkDriver.GetCapabilities') ?? [];
          const j50 = percentile(join, 0.5);
          const j99 = percentile(join, 0.99);
          if (Number.isNaN(base)) base = j50;
          const label = `spare veths ${spares === '0' ? 'off' : spares}, ${gapMs === 0 ? 'back to back' : `${gapMs} ms apart`}`;
          rows.push([label, fmt(j50, 3), fmt(j99, 3), `${fmt(j50 / base)}x`, fmt(percentile(del, 0.5), 3), fmt(percentile(rt, 0.5), 3)]);
          if (spares !== '0' && gapMs === 0)
            verdicts.push(
              `back to back with spares: Join p50 ${fmt(j50, 3)} ms (target <= 5: ${j50 <= 5 ? 'met' : 'NOT met'}), p99 ${fmt(j99, 3)} ms (target <= 15: ${j99 <= 15 ? 'met' : 'NOT met'})`,
            );
        }
      } finally {
        await ovsnet.kill('SIGTERM');
      }
    }
    const ovsnet = await host.startOvsnet();
    try {
      docker = await dockerRuns(host, ovsnet);
    } finally {
      await ovsnet.kill('SIGTERM');
    }
  } finally {
    await host.down();
  }
  console.log(`Join under churn: ${n} endpoints per row after 20 warm-up, one at a time over the socket, embedded store\n`);
  console.log(
    table(['endpoints', 'Join p50 ms', 'Join p99 ms', 'p50 vs first row', 'Leave+DeleteEndpoint p50 ms', 'HTTP round trip p50 ms'], rows),
  );
  console.log(`\n${verdicts.join('\n')}`);
  console.log(`\n${docker}`);
}

/** A bench driver's socket, as seen from outside the host. */
export const driverSocket = (host: DockerHost, name: string) => path.join(host.pluginDir, `${name}.sock`);
const nullSocket = (host: DockerHost) => driverSocket(host, 'nullnet');

/** A bench driver (this folder's `file`) started inside the host as ovsnet is, serving `name`.sock (its driver name). */
function startBenchDriver(
  host: DockerHost,
  name: string,
  file: string,
  env: Record<string, string>,
  flags: readonly string[],
): Promise<Ovsnet> {
  const main = path.join(path.dirname(fileURLToPath(import.meta.url)), file);
  return Ovsnet.start(driverSocket(host, name), { OVSNET_SOCKET: `/run/docker/plugins/${name}.sock`, ...env }, host.enter, main, flags);
}

/** The null driver (null-driver.ts), on nullnet.sock (network driver `nullnet`). */
export function startNullDriver(host: DockerHost): Promise<Ovsnet> {
  return startBenchDriver(host, 'nullnet', 'null-driver.js', {}, []);
}

/**
 * The floor of ovsnet's design (floor-driver.ts), with the plugin's node flags (and
 * `extraFlags`), on floornet.sock (network and IPAM driver `floornet`), storing in `store`.
 */
export function startFloorDriver(host: DockerHost, store: string, extraFlags: readonly string[] = []): Promise<Ovsnet> {
  return startBenchDriver(host, 'floornet', 'floor-driver.js', { OVSNET_STORE: store }, [...launchFlags(MAIN), ...extraFlags]);
}

/**
 * On the same host and dockerd, ovsnet (its IPAM, spare veths on) against a user-defined bridge:
 * BENCH_STORM (100) parallel `docker run -d`, each network in turn, and the same on the null
 * driver (null-driver.ts: the remote protocol's floor, Docker's IPAM); and `docker run --rm`
 * alternating over ovsnet, the bridge, the null driver and `--network none` (the floor: no
 * network at all), with each plugin's CPU over its own runs beside its CPU in the storms.
 */
async function dockerRuns(host: DockerHost, ovsnet: Ovsnet): Promise<string> {
  await host.dockerOk(['network', 'create', '-d', 'ovsnet', '--ipam-driver', 'ovsnet', '--subnet', '10.249.0.0/20', 'stormovs']);
  await host.dockerOk(['network', 'create', '-d', 'bridge', '--subnet', '10.248.0.0/20', 'stormbr']);
  const nullDriver = await startNullDriver(host);
  try {
    await host.dockerOk(['network', 'create', '-d', 'nullnet', '--subnet', '10.247.0.0/20', 'stormnull']);
    return await dockerRunsOn(host, ovsnet, nullDriver);
  } finally {
    await nullDriver.kill('SIGTERM');
  }
}

/** CPU ms per container over the starts and over the removals; `startMain`: the main thread's part of `start`. */
type PerContainer = { start: number; stop: number; startMain: number };

/** A storm on `network` and `plugin`'s CPU per container over its starts, then over its removals. */
async function pluginStorm(
  host: DockerHost,
  plugin: Ovsnet,
  network: string,
  n: number,
  prefix: string,
  afterStart: () => Promise<void>,
): Promise<{ storm: Storm; cpu: PerContainer }> {
  const u0 = cpuSeconds(plugin);
  const m0 = cpuSplit(plugin).main;
  let [u1, m1] = [u0, m0];
  const s = await storm(host, network, n, prefix, async () => {
    [u1, m1] = [cpuSeconds(plugin), cpuSplit(plugin).main];
    await afterStart();
  });
  return {
    storm: s,
    cpu: { start: ((u1 - u0) * 1000) / n, stop: ((cpuSeconds(plugin) - u1) * 1000) / n, startMain: ((m1 - m0) * 1000) / n },
  };
}

async function dockerRunsOn(host: DockerHost, ovsnet: Ovsnet, nullDriver: Ovsnet): Promise<string> {
  const n = Number(process.env.BENCH_STORM ?? 100);
  const rounds = Number(process.env.BENCH_STORM_ROUNDS ?? 2);
  const ovs: Storm[] = [];
  const br: Storm[] = [];
  const nul: Storm[] = [];
  const cpu: PerContainer[] = [];
  const nullCpu: PerContainer[] = [];
  /** Both plugins' RSS after each null-driver storm (the two idle then, all containers removed). */
  const rss: string[] = [];
  // ovsnet's loop delay idle (5 s, nothing asked of it), over each of its storms' starts and
  // removals, and over the bridge's starts (the machine as loaded, ovsnet asked nothing); a bare
  // Node process's beside each. A scrape (a probe read) ends the window the previous one began.
  const probe = await LoopProbe.start();
  const loopRows: string[][] = [];
  const begin = () => Promise.all([scrape(host, METRICS_PORT), probe.read()]);
  /** The null driver's loop delay since the last read (a new window begins). */
  const nullLag = async () => (await unixGet(nullSocket(host), '/metrics', 5000))?.body ?? '';
  const end = async (label: string, judged: boolean) => {
    const [text, bare] = await begin();
    loopRows.push(loopRow(label, loopDelay(text), bare, judged));
  };
  try {
    await begin();
    await new Promise((r) => setTimeout(r, 5000));
    await end('idle, 5 s', false);
    for (let r = 0; r < rounds; r++) {
      // Rotating which goes first, so none always runs on a warmer (or more loaded) host.
      const order = (['ovs', 'br', 'null', 'ovs', 'br'] as const).slice(r % 3, (r % 3) + 3);
      for (const which of order) {
        await begin();
        if (which === 'ovs') {
          // ovsnet's CPU (/proc: both threads) over the starts, then over the removals.
          const run = await pluginStorm(host, ovsnet, 'stormovs', n, `so${r}x`, () => end(`round ${r + 1}: ${n} starts`, true));
          ovs.push(run.storm);
          cpu.push(run.cpu);
          await end(`round ${r + 1}: ${n} removals`, true);
        } else if (which === 'null') {
          // The null driver's own loop delay over its storm's starts, beside the bare process's.
          await nullLag();
          const run = await pluginStorm(host, nullDriver, 'stormnull', n, `sn${r}x`, async () => {
            const [text, bare] = await Promise.all([nullLag(), probe.read()]);
            loopRows.push(loopRow(`round ${r + 1}: ${n} starts on the null driver (its own loop)`, loopDelay(text), bare, false));
          });
          nul.push(run.storm);
          nullCpu.push(run.cpu);
          rss.push(`round ${r + 1}: ovsnet ${fmt(rssMiB(ovsnet), 1)}, the null driver ${fmt(rssMiB(nullDriver), 1)}`);
        } else
          br.push(
            await storm(host, 'stormbr', n, `sb${r}x`, () =>
              end(`round ${r + 1}: ${n} starts on the bridge (ovsnet asked nothing)`, false),
            ),
          );
      }
    }
  } finally {
    probe.stop();
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)] ?? NaN;
  const wo = median(ovs.map((s) => s.wallMs));
  const wb = median(br.map((s) => s.wallMs));
  const wn = median(nul.map((s) => s.wallMs));
  const fails = (ss: Storm[]) => ss.reduce((a, s) => a + s.failures, 0);
  const errors = [...ovs, ...br, ...nul].flatMap((s) => (s.firstError === undefined ? [] : [s.firstError]));

  const runs = Number(process.env.BENCH_RUNS ?? 10);
  const rm: Record<string, number[]> = { ovs: [], br: [], none: [], null: [] };
  const before = await dockerCalls(host);
  const args: Record<string, string[]> = {
    ovs: ['--network', 'stormovs'],
    br: ['--network', 'stormbr'],
    none: ['--network', 'none'],
    null: ['--network', 'stormnull'],
  };
  // Each plugin's CPU over its own runs, one container at a time: the same work as in a storm
  // without 100 starts contending for the 2 cores.
  const plugins: Record<string, Ovsnet> = { ovs: ovsnet, null: nullDriver };
  const soloCpu: Record<string, number> = { ovs: 0, null: 0 };
  for (let i = 0; i < runs + 2; i++) {
    for (const k of ['none', 'ovs', 'br', 'null']) {
      const plugin = plugins[k];
      const u0 = plugin === undefined ? 0 : cpuSeconds(plugin);
      const t0 = process.hrtime.bigint();
      await host.dockerOk(['run', '--rm', ...(args[k] ?? []), IMAGE, 'true']);
      if (i < 2) continue;
      rm[k]?.push(Number(process.hrtime.bigint() - t0) / 1e6);
      if (plugin !== undefined) soloCpu[k] = (soloCpu[k] ?? 0) + ((cpuSeconds(plugin) - u0) * 1000) / runs;
    }
  }
  const after = await dockerCalls(host);
  // What ovsnet itself spends per `docker run --rm` (every Docker call it answered, summed),
  // beside what the run costs over none.
  const ownMs = ((after.seconds - before.seconds) * 1000) / (runs + 2);
  const callsPerRun = (after.count - before.count) / (runs + 2);
  const [mn, mo, mb, mu] = ['none', 'ovs', 'br', 'null'].map((k) => median(rm[k] ?? []));
  const costO = (mo ?? NaN) - (mn ?? NaN);
  const costB = (mb ?? NaN) - (mn ?? NaN);
  const costU = (mu ?? NaN) - (mn ?? NaN);
  const stormLifecycle = (cs: PerContainer[]) => cs.map((c) => fmt(c.start + c.stop, 1)).join(' / ');
  return [
    `${n} parallel docker run -d, ${rounds} rounds each, alternating which network goes first; target: 0 failures, ovsnet <= 1.00x of the bridge\n`,
    table(
      ['network', 'median wall ms', 'failures', 'vs bridge'],
      [
        ['user-defined bridge [baseline]', fmt(wb, 0), String(fails(br)), '1.00x'],
        ['ovsnet (OVS, ovsnet IPAM)', fmt(wo, 0), String(fails(ovs)), `${fmt(wo / wb)}x`],
        [
          'null remote driver (a veth per Join, Docker IPAM): the floor of any remote driver',
          fmt(wn, 0),
          String(fails(nul)),
          `${fmt(wn / wb)}x`,
        ],
      ],
    ),
    `each storm's wall ms, in the order run: ovsnet ${ovs.map((s) => fmt(s.wallMs, 0)).join(' / ')}, bridge ${br.map((s) => fmt(s.wallMs, 0)).join(' / ')}, null driver ${nul.map((s) => fmt(s.wallMs, 0)).join(' / ')}`,
    `RSS after the null driver's storm, MiB: ${rss.join('; ')}`,
    `the null driver's CPU per container in its storms (its process, every thread), per round: start ${nullCpu.map((c) => fmt(c.start, 1)).join(' / ')} ms (its main thread ${nullCpu.map((c) => fmt(c.startMain, 1)).join(' / ')}), stop ${nullCpu.map((c) => fmt(c.stop, 1)).join(' / ')} ms`,
    ...(errors.length === 0 ? [] : [`first failure: ${errors[0] ?? ''}`]),
    `storm: ${fails(ovs) === 0 && wo / wb <= 1 ? 'met' : 'NOT met'}`,
    `ovsnet CPU per container in its storms, embedded store (no etcd), per round: start ${cpu.map((c) => fmt(c.start, 1)).join(' / ')} ms (its main thread ${cpu.map((c) => fmt(c.startMain, 1)).join(' / ')}), stop ${cpu.map((c) => fmt(c.stop, 1)).join(' / ')} ms (with etcd: npm run bench -- cluster)`,
    `\novsnet's event-loop delay, idle and over the storms (its nodejs_eventloop_lag_* gauges, beyond their 10 ms timer), embedded store\n`,
    table(LOOP_HEADERS, loopRows),
    `\ndocker run --rm ... true, ${runs} runs each after 2 warm-up, alternating; target: ovsnet's cost over none <= 0.8x the bridge's\n`,
    table(
      ['network', 'median ms', 'cost over none ms', 'cost vs bridge'],
      [
        ['--network none [floor]', fmt(mn ?? NaN, 1), '0', ''],
        ['user-defined bridge [baseline]', fmt(mb ?? NaN, 1), fmt(costB, 1), '1.00x'],
        ['ovsnet', fmt(mo ?? NaN, 1), fmt(costO, 1), `${fmt(costO / costB)}x`],
        ['null remote driver', fmt(mu ?? NaN, 1), fmt(costU, 1), `${fmt(costU / costB)}x`],
      ],
    ),
    `ovsnet's own handling per run: ${fmt(ownMs, 1)} ms in ${fmt(callsPerRun, 1)} Docker calls (its handlers' durations summed, from its metrics); dockerd waits for each call, but works beside some, so this is not a part of the cost over none`,
    `run --rm: ${costO / costB <= 0.8 ? 'met' : 'NOT met'}`,
    `CPU per container, start + stop, one at a time (these runs) vs in the storms (per round): ovsnet ${fmt(soloCpu.ovs ?? NaN, 1)} vs ${stormLifecycle(cpu)} ms, the null driver ${fmt(soloCpu.null ?? NaN, 1)} vs ${stormLifecycle(nullCpu)} ms: what contending for 2 cores with 100 starts adds to the same work`,
  ].join('\n');
}

/** The sum and count of ovsnet's Docker call durations so far (its /metrics, in the host). */
async function dockerCalls(host: DockerHost): Promise<{ seconds: number; count: number }> {
  const text = await scrape(host, METRICS_PORT);
  const total = (suffix: string) =>
    [...text.matchAll(new RegExp(`^ovsnet_docker_call_duration_seconds_${suffix}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))].reduce(
      (a, m) => a + Number(m[1]),
      0,
    );
  return { seconds: total('sum'), count: total('count') };
}
