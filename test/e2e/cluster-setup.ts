/**
 * Three simulated hosts with dockerd, Open vSwitch and ovsnet each, sharing one etcd over an
 * underlay (test/harness), and the helpers the multi-host tests use on them.
 */
import type { Test } from 'tap';
import { Cluster, histogramSummary } from '../harness/cluster.js';
import { CREATE_OVSNET, IMAGE, MAIN, type Ovsnet, run } from '../harness/host.js';
import type { ReservationRow } from '../../src/cli/reservations.js';

export const TTL_SECONDS = 3;
export const GRACE_SECONDS = 20;

export interface PoolView {
  pool: string;
  used: number;
  logical: string;
  byHost: Record<string, number>;
  blocks: Record<string, number>;
}

export class MultiHost {
  readonly daemons: (Ovsnet | undefined)[] = [];

  private constructor(
    readonly cluster: Cluster,
    private readonly extraEnv: Readonly<Record<string, string>>,
  ) {}

  /** `extraEnv`: settings every host's ovsnet gets beside the cluster's own. */
  static async up(t: Test, prefix: string, extraEnv: Readonly<Record<string, string>> = {}): Promise<MultiHost> {
    const cluster = await Cluster.up(prefix, 3);
    const m = new MultiHost(cluster, extraEnv);
    t.teardown(async () => {
      // Hosts go while their ovsnet still answers (a dead plugin socket stalls Docker ~15 s).
      await cluster.down();
      for (const d of m.daemons) await d?.kill('SIGTERM').catch(() => undefined);
    });
    for (let i = 0; i < 3; i++) await m.start(i);
    return m;
  }

  env(i: number): Record<string, string> {
    return {
      OVSNET_STORE: this.cluster.store,
      OVSNET_HOST: `h${i + 1}`,
      OVSNET_VTEP_IP: this.cluster.addresses[i] ?? '',
      OVSNET_HOST_TTL: String(TTL_SECONDS),
      OVSNET_RECLAIM_GRACE: String(GRACE_SECONDS),
      OVSNET_LOG_LEVEL: 'info',
      ...this.extraEnv,
    };
  }

  async start(i: number): Promise<Ovsnet> {
    const d = await this.host(i).startOvsnet(this.env(i));
    this.daemons[i] = d;
    return d;
  }

  host(i: number) {
    const h = this.cluster.hosts[i];
    if (h === undefined) throw new Error(`no host ${i}`);
    return h;
  }

  docker(i: number, args: readonly string[]) {
    return this.host(i).docker(args);
  }

  dockerOk(i: number, args: readonly string[], timeoutMs?: number): Promise<string> {
    return this.host(i).dockerOk(args, timeoutMs);
  }

  /** docker network create of logical network `name` on host i. */
  createLogical(i: number, name: string, subnet: string, extra: readonly string[] = []): Promise<string> {
    return this.dockerOk(i, [
      ...CREATE_OVSNET,
      '--subnet',
      subnet,
      '-o',
      `ovsnet.network=${name}`,
      '-o',
      'ovsnet.encap=vxlan',
      ...extra,
      name,
    ]);
  }

  runOn(i: number, name: string, net: string): Promise<string> {
    return this.dockerOk(i, ['run', '-d', '--name', name, '--network', net, IMAGE, 'sleep', '600']);
  }

  ip(i: number, container: string, net: string): Promise<string> {
    return this.dockerOk(i, ['inspect', '-f', `{{(index .NetworkSettings.Networks "${net}").IPAddress}}`, container]);
  }

  async ping(i: number, from: string, to: string, size = 56): Promise<boolean> {
    return (await this.docker(i, ['exec', from, 'ping', '-c', '2', '-W', '2', '-s', String(size), to])).code === 0;
  }

  /** Names of host i's tunnel ports (OVS ports ovsnet made with role tunnel), with their peer. */
  async tunnels(i: number): Promise<string[]> {
    const r = await this.host(i).exec(['ovs-vsctl', '--bare', '--columns=external_ids', 'find', 'Port', 'external_ids:ovsnet-role=tunnel']);
    return r.stdout
      .split('\n')
      .flatMap((l) => /ovsnet-peer=([^\s,]+)/.exec(l)?.[1] ?? [])
      .sort();
  }

  /** The hosts registered now, as `ovsnet status` on host i reports them. */
  async registered(i = 0): Promise<string[]> {
    const r = await this.cli(i, ['status', '--json']);
    try {
      return ((JSON.parse(r.stdout) as { hosts?: string[] }).hosts ?? []).sort();
    } catch {
      return [];
    }
  }

  /**
   * Where time went under load, one line per host and one for etcd: ovsnet's store round trips
   * and event-loop lag (its /metrics) beside etcd's WAL fsyncs and commits.
   */
  async latencies(): Promise<string> {
    const lines = [`etcd: ${await this.cluster.etcdLatency()}`];
    for (let i = 0; i < this.cluster.hosts.length; i++) {
      const text = (await this.host(i).exec(['wget', '-q', '-O', '-', '-T', '2', 'http://127.0.0.1:9477/metrics'])).stdout;
      const lag = /^nodejs_eventloop_lag_max_seconds (\S+)/m.exec(text)?.[1] ?? '?';
      lines.push(`h${i + 1} store calls: ${histogramSummary(text, 'ovsnet_store_request_duration_seconds')}; event loop lag max ${lag}s`);
    }
    return lines.join('\n');
  }

  /** What to look at when traffic between hosts fails: printed by tests as a comment. */
  async diagnostics(): Promise<string> {
    const out = [`registered: ${(await this.registered()).join(' ')}`];
    for (const [i, h] of this.cluster.hosts.entries()) {
      const flows = (await h.exec(['ovs-appctl', 'dpctl/dump-flows'])).stdout.split('\n').filter((l) => l.includes('4789'));
      const warnings = (this.daemons[i]?.log ?? '')
        .split('\n')
        .filter((l) => /"level":(40|50|60)/.test(l))
        .slice(-8);
      out.push(
        `h${i + 1} tunnels to: ${(await this.tunnels(i)).join(' ')}`,
        `h${i + 1} datapath flows of VXLAN:`,
        ...flows,
        `h${i + 1} ovsnet warnings:`,
        ...warnings,
      );
    }
    return out.join('\n');
  }

  /** `ovsnet ipam --json` inside host i, from the shared store. */
  async pools(i: number): Promise<PoolView[]> {
    const r = await this.cli(i, ['ipam', '--json']);
    return JSON.parse(r.stdout) as PoolView[];
  }

  /** `ovsnet ARGS` inside host i, on the shared store. */
  private cli(i: number, args: readonly string[]) {
    return this.host(i).exec(['env', `OVSNET_STORE=${this.cluster.store}`, process.execPath, MAIN, ...args]);
  }

  /** `ovsnet ipam --reservations POOL --json` inside host i, from the shared store. */
  async reservations(i: number, pool: string): Promise<ReservationRow[]> {
    const r = await this.cli(i, ['ipam', '--reservations', pool, '--json']);
    return JSON.parse(r.stdout) as ReservationRow[];
  }
}

/** Polls `cond` every 100 ms until it holds or `ms` pass; returns the milliseconds it took. */
export async function until(cond: () => Promise<boolean>, ms: number): Promise<number> {
  const t0 = Date.now();
  while (!(await cond())) {
    if (Date.now() - t0 > ms) return Number.POSITIVE_INFINITY;
    await new Promise((r) => setTimeout(r, 100));
  }
  return Date.now() - t0;
}

/** Lines of the root namespace's links, routes, mounts and iptables that mention any of `marks`. */
export async function rootTraces(marks: readonly string[]): Promise<string[]> {
  const outs = await Promise.all([
    run('ip', ['-o', 'link', 'show']),
    run('ip', ['route', 'show', 'table', 'all']),
    run('findmnt', ['-rn', '-o', 'TARGET,SOURCE']),
    run('iptables-save', []),
  ]);
  return outs.flatMap((o) => o.stdout.split('\n')).filter((l) => marks.some((m) => l.includes(m)));
}
