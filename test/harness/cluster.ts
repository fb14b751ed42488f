/** Several simulated hosts sharing an underlay and an etcd: the multi-host tests' cluster. */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { DockerHost, must, run, SCRIPT } from './host.js';

/**
 * Several hosts on one underlay (a bridge in a namespace of its own), sharing one etcd that runs
 * inside the first host and listens on its underlay address (docs/test-hosts.md).
 */
export class Cluster {
  private etcd: ChildProcess | undefined;

  private constructor(
    readonly underlay: { name: string; dir: string },
    readonly hosts: DockerHost[],
    readonly addresses: string[],
    /**
     * etcd's data, on tmpfs: the cluster tests measure ovsnet, and this machine's one disk is
     * shared with three dockerds and the rest of the suite (measured during the 90-container
     * test: WAL fsync p99 0.128 s, max 0.5 s on disk; 0.001 s on tmpfs). ovsnet's reaction to a
     * slow etcd is tested by freezing it (pauseEtcd).
     */
    readonly etcdDir: string,
  ) {}

  /** etcd://... as the hosts reach it. */
  get store(): string {
    return `etcd://${this.addresses[0] ?? ''}:2379`;
  }

  static async up(prefix: string, count: number): Promise<Cluster> {
    const tag = randomBytes(2).toString('hex');
    const underlay = { name: `${prefix}-ul-${tag}`.slice(0, 15), dir: path.join('/tmp', `ovsnet-ul-${prefix}-${tag}`) };
    await must('bash', [SCRIPT, 'underlay-up', underlay.name, underlay.dir]);
    const hosts: DockerHost[] = [];
    const cluster = new Cluster(underlay, hosts, [], path.join('/dev/shm', `ovsnet-etcd-${prefix}-${tag}`));
    cluster.removeWith(cluster.etcdDir);
    try {
      // Every host that came up is known to down(), even when another failed.
      const made = await Promise.allSettled(Array.from({ length: count }, (_, i) => DockerHost.up(`${prefix}${i + 1}`)));
      for (const r of made) if (r.status === 'fulfilled') hosts.push(r.value);
      const failed = made.find((r) => r.status === 'rejected');
      if (failed !== undefined) throw failed.reason;
      for (const [i, h] of hosts.entries()) {
        const addr = `10.200.${Number.parseInt(tag, 16) % 200}.${i + 1}`;
        await must('bash', [SCRIPT, 'attach', h.name, h.dir, underlay.name, `${addr}/24`]);
        cluster.addresses.push(addr);
      }
      await cluster.startEtcd();
    } catch (err) {
      await cluster.down();
      throw err;
    }
    return cluster;
  }

  private async startEtcd(): Promise<void> {
    const first = this.hosts[0];
    const addr = this.addresses[0];
    if (first === undefined || addr === undefined) throw new Error('no host for etcd');
    this.etcd = spawn(
      'nsenter',
      [
        `--net=/run/netns/${first.name}`,
        '--',
        'etcd',
        '--name',
        'cluster',
        '--data-dir',
        this.etcdDir,
        '--listen-client-urls',
        `http://${addr}:2379,http://127.0.0.1:2379`,
        '--advertise-client-urls',
        `http://${addr}:2379`,
        '--listen-peer-urls',
        'http://127.0.0.1:2380',
        '--initial-advertise-peer-urls',
        'http://127.0.0.1:2380',
        '--initial-cluster',
        'cluster=http://127.0.0.1:2380',
        '--metrics',
        'extensive',
      ],
      { stdio: 'ignore' },
    );
    for (let i = 0; i < 100; i++) {
      const r = await first.exec(['wget', '-q', '-O', '-', '-T', '1', `http://${addr}:2379/health`]);
      if (r.stdout.includes('"health":"true"')) return;
      await new Promise((res) => setTimeout(res, 100));
    }
    throw new Error('etcd in the cluster did not become healthy');
  }

  /**
   * etcd's own view of where time went: Txn handling (gRPC), WAL fsyncs and backend commits
   * (histogramSummary), from its /metrics. A store call timing out under load reads differently
   * when etcd was slow to answer than when ovsnet was slow to read the answer.
   */
  async etcdLatency(): Promise<string> {
    const first = this.hosts[0];
    if (first === undefined) return 'no etcd';
    const r = await first.exec(['wget', '-q', '-O', '-', '-T', '2', 'http://127.0.0.1:2379/metrics']);
    const txns = r.stdout
      .split('\n')
      .filter((l) => !l.startsWith('grpc_server_handling_seconds_bucket') || l.includes('grpc_method="Txn"'))
      .join('\n');
    return [
      `txn handling: ${histogramSummary(txns, 'grpc_server_handling_seconds')}`,
      `wal fsync: ${histogramSummary(r.stdout, 'etcd_disk_wal_fsync_duration_seconds')}`,
      `backend commit: ${histogramSummary(r.stdout, 'etcd_disk_backend_commit_duration_seconds')}`,
    ].join('; ');
  }

  /** Freezes etcd (SIGSTOP): connections hang, as with a partition, until resumeEtcd(). */
  pauseEtcd(): void {
    this.etcd?.kill('SIGSTOP');
  }

  /**
   * `dir` (under /tmp/ovsnet-* or /dev/shm/ovsnet-*) is removed with the underlay, also when this
   * process ends without its teardown (host.sh reap).
   */
  removeWith(dir: string): void {
    fs.appendFileSync(path.join(this.underlay.dir, 'also'), `${dir}\n`);
  }

  resumeEtcd(): void {
    this.etcd?.kill('SIGCONT');
  }

  async down(): Promise<void> {
    this.resumeEtcd();
    // Hosts first (their teardown sweeps etcd, which lives in the first host's namespace).
    await Promise.all(this.hosts.map((h) => h.down()));
    this.etcd?.kill('SIGKILL');
    await run('ip', ['netns', 'del', this.underlay.name]);
    fs.rmSync(this.underlay.dir, { recursive: true, force: true });
    fs.rmSync(this.etcdDir, { recursive: true, force: true });
  }
}

/**
 * "n=…, p99 <= …s, >…s: …, max <= …s" of a Prometheus histogram in `text`, summed over its series
 * (cumulative bucket counts add up); "slow" is above the largest bucket of at most 0.5 s.
 */
export function histogramSummary(text: string, name: string): string {
  const byLe = new Map<number, number>();
  for (const m of text.matchAll(new RegExp(`^${name}_bucket\\{([^}]*)\\} (\\d+)`, 'gm'))) {
    const le = /le="([^"]+)"/.exec(m[1] ?? '')?.[1];
    if (le === undefined) continue;
    const at = le === '+Inf' ? Number.POSITIVE_INFINITY : Number(le);
    byLe.set(at, (byLe.get(at) ?? 0) + Number(m[2]));
  }
  const buckets = [...byLe].sort(([a], [b]) => a - b);
  const total = buckets.at(-1)?.[1] ?? 0;
  if (total === 0) return 'no samples';
  const slowLe = buckets.filter(([b]) => b <= 0.5).at(-1)?.[0] ?? 0;
  const slow = total - (byLe.get(slowLe) ?? 0);
  const p99 = buckets.find(([, c]) => c >= total * 0.99)?.[0];
  const max = buckets.find(([, c]) => c === total)?.[0];
  return `n=${total}, p99 <= ${p99}s, >${slowLe}s: ${slow}, max <= ${max}s`;
}
