/**
 * Driver benchmark, on a simulated host (test/harness) with its own dockerd and Open vSwitch.
 * 1. Join and Leave through the plugin socket (bench/driver-calls.ts: CreateEndpoint and
 *    DeleteEndpoint around them), next to NetworkDriver.GetCapabilities (the bare HTTP round trip; not Plugin.Activate, which
 *    starts a reconcile that the next Join would wait for) and a naive Join that spawns ip,
 *    ethtool and ovs-vsctl, measured in the same run.
 * 2. `docker run --rm` on an ovsnet network vs a user-defined bridge network on the same
 *    daemon, alternating, medians of BENCH_RUNS (default 10) and their ratio.
 */
import { spawn } from 'node:child_process';
import { DockerHost, IMAGE } from '../test/harness/host.js';
import { timeDriverCalls } from './driver-calls.js';
import { fmt, percentile, table } from './stats.js';

const time = async (f: () => Promise<unknown>): Promise<number> => {
  const t0 = process.hrtime.bigint();
  await f();
  return Number(process.hrtime.bigint() - t0) / 1e6;
};
const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);

function sh(cmd: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const [c, ...a] = cmd;
    const p = spawn(c ?? 'false', a, { stdio: 'ignore' });
    p.on('error', reject);
    p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd.join(' ')} exited ${code}`))));
  });
}

export async function benchDriver(): Promise<void> {
  const host = await DockerHost.up('benchdrv');
  const ovsnet = await host.startOvsnet();
  try {
    const n = Number(process.env.BENCH_N ?? 200);
    const calls = await timeDriverCalls(host, n, 250);
    const sa = calls.get('NetworkDriver.GetCapabilities') ?? [];
    const sj = calls.get('NetworkDriver.Join') ?? [];
    const sl = calls.get('Leave + DeleteEndpoint') ?? [];
    // The naive plugin's Join, on the same host: one process per step.
    const enter = ['nsenter', `--net=/run/netns/${host.name}`, `--mount=${host.dir}/mntns`, '--'];
    const naive: number[] = [];
    for (let i = 0; i < Math.min(n, 30); i++) {
      naive.push(
        await time(async () => {
          await sh([...enter, 'ip', 'link', 'add', `nvh${i}`, 'type', 'veth', 'peer', 'name', `nvc${i}`]);
          await sh([...enter, 'ip', 'link', 'set', `nvh${i}`, 'mtu', '1500', 'up']);
          await sh([...enter, 'ethtool', '-K', `nvc${i}`, 'tx', 'off']);
          await sh([...enter, 'ovs-vsctl', 'add-port', 'ovsnet0', `nvh${i}`, 'tag=1']);
        }),
      );
      await sh([...enter, 'ovs-vsctl', 'del-port', 'ovsnet0', `nvh${i}`]);
      await sh([...enter, 'ip', 'link', 'del', `nvh${i}`]);
    }
    const sn = sorted(naive);
    const j50 = percentile(sj, 0.5);
    console.log(`plugin calls on the socket, ${n} endpoints after 20 warm-up, 40 ms apart; target: Join p50 <= 5 ms\n`);
    console.log(
      table(
        ['call', 'p50 ms', 'p99 ms', 'p50 vs ovsnet Join'],
        [
          [
            'GetCapabilities (HTTP round trip)',
            fmt(percentile(sa, 0.5), 3),
            fmt(percentile(sa, 0.99), 3),
            `${fmt(percentile(sa, 0.5) / j50)}x`,
          ],
          ['NetworkDriver.Join', fmt(j50, 3), fmt(percentile(sj, 0.99), 3), '1.00x'],
          ['Leave + DeleteEndpoint', fmt(percentile(sl, 0.5), 3), fmt(percentile(sl, 0.99), 3), `${fmt(percentile(sl, 0.5) / j50)}x`],
          [
            `naive Join: ip, ip, ethtool, ovs-vsctl (${sn.length})`,
            fmt(percentile(sn, 0.5), 3),
            fmt(percentile(sn, 0.99), 3),
            `${fmt(percentile(sn, 0.5) / j50)}x`,
          ],
        ],
      ),
    );
    console.log(`\nJoin p50 ${fmt(j50, 3)} ms: target ${j50 <= 5 ? 'met' : 'NOT met'}`);

    // docker run --rm: ovsnet vs a user-defined bridge, same daemon, alternating.
    await host.dockerOk(['network', 'create', '-d', 'ovsnet', '--ipam-driver', 'ovsnet', '--subnet', '10.251.0.0/24', 'benchovs']);
    await host.dockerOk(['network', 'create', '-d', 'bridge', '--subnet', '10.252.0.0/24', 'benchbr']);
    const runs = Number(process.env.BENCH_RUNS ?? 10);
    const ovs: number[] = [];
    const br: number[] = [];
    for (let i = 0; i < runs + 2; i++) {
      const o = await time(() => host.dockerOk(['run', '--rm', '--network', 'benchovs', IMAGE, 'true']));
      const b = await time(() => host.dockerOk(['run', '--rm', '--network', 'benchbr', IMAGE, 'true']));
      if (i >= 2) {
        ovs.push(o);
        br.push(b);
      }
    }
    const mo = percentile(sorted(ovs), 0.5);
    const mb = percentile(sorted(br), 0.5);
    console.log(`\ndocker run --rm, ${runs} runs each after 2 warm-up, alternating; target ratio <= 1.00\n`);
    console.log(
      table(
        ['network', 'median ms', 'min ms', 'max ms', 'vs bridge'],
        [
          ['user-defined bridge (baseline)', fmt(mb, 1), fmt(Math.min(...br), 1), fmt(Math.max(...br), 1), '1.00x'],
          ['ovsnet (OVS, ovsnet IPAM)', fmt(mo, 1), fmt(Math.min(...ovs), 1), fmt(Math.max(...ovs), 1), `${fmt(mo / mb)}x`],
        ],
      ),
    );
    console.log(`\nratio ${fmt(mo / mb)}: target ${mo / mb <= 1 ? 'met' : 'NOT met'}`);
  } finally {
    await host.down();
    await ovsnet.kill('SIGTERM');
  }
}
