/**
 * Simulated Docker hosts for end-to-end tests (host.sh does the namespace work) and the
 * ovsnet process under test. Every test file makes its own host, so files run in parallel.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const SCRIPT = fileURLToPath(new URL('../../../test/harness/host.sh', import.meta.url));
export const MAIN = fileURLToPath(new URL('../../src/main.js', import.meta.url));
export const IMAGE = 'ovsnet-test/busybox:latest';

/**
 * OVSNET_OVSDB for an ovsnet that runs outside any test host (IPAM-only tests, benchmarks): a
 * socket nobody serves, so that its driver never touches an Open vSwitch of this machine.
 */
export const NO_OVS = 'unix:/nonexistent/ovsnet-test/db.sock';

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function run(
  cmd: string,
  args: readonly string[],
  opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; input?: string } = {},
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: opts.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 120_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    // A command that exits without reading its input closes the pipe: that is no error.
    child.stdin.on('error', () => undefined);
    child.stdin.end(opts.input ?? '');
  });
}

async function must(cmd: string, args: readonly string[], env?: NodeJS.ProcessEnv): Promise<Run> {
  const r = await run(cmd, args, env === undefined ? {} : { env });
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.code}):\n${r.stderr}${r.stdout}`);
  return r;
}

export class DockerHost {
  private constructor(
    readonly name: string,
    readonly dir: string,
  ) {}

  /** Path of the host's plugin socket directory as seen from outside the host. */
  get pluginDir(): string {
    return path.join(this.dir, 'run', 'docker', 'plugins');
  }

  static async up(prefix: string, opts: { dockerdArgs?: string } = {}): Promise<DockerHost> {
    const name = `${prefix}-${randomBytes(3).toString('hex')}`.slice(0, 15);
    const host = new DockerHost(name, path.join('/tmp', `ovsnet-host-${name}`));
    try {
      await must('bash', [SCRIPT, 'up', name, host.dir], { ...process.env, DOCKERD_ARGS: opts.dockerdArgs ?? '' });
    } catch (err) {
      await host.down();
      throw err;
    }
    return host;
  }

  docker(args: readonly string[], timeoutMs = 60_000): Promise<Run> {
    return run('docker', ['-H', `unix://${this.dir}/run/docker.sock`, ...args], { timeoutMs });
  }

  /** docker ..., failing the test with Docker's output when it fails. */
  async dockerOk(args: readonly string[]): Promise<string> {
    const r = await this.docker(args);
    if (r.code !== 0) throw new Error(`docker ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
    return r.stdout.trim();
  }

  exec(args: readonly string[]): Promise<Run> {
    return run('bash', [SCRIPT, 'exec', this.name, this.dir, '--', ...args]);
  }

  /**
   * Starts ovsnet inside the host (its network and mount namespaces), serving the host's
   * plugin directory, with the embedded store in the host's /run unless `env` says otherwise.
   */
  startOvsnet(env: Record<string, string> = {}): Promise<Ovsnet> {
    return Ovsnet.start(
      path.join(this.pluginDir, 'ovsnet.sock'),
      {
        OVSNET_SOCKET: '/run/docker/plugins/ovsnet.sock',
        OVSNET_STORE: 'sqlite:/run/ovsnet/state.db',
        OVSNET_JOURNAL: '/run/ovsnet/unconfirmed.json', // per host (/var/lib is the machine's)
        OVSNET_LOG_LEVEL: 'warn',
        // On the host's own loopback: every host can use the same port.
        OVSNET_METRICS_ADDR: '9477',
        ...env,
      },
      ['nsenter', `--net=/run/netns/${this.name}`, `--mount=${this.dir}/mntns`, `--uts=${this.dir}/utsns`, '--'],
    );
  }

  /** The embedded store file of an ovsnet started by startOvsnet(), as seen from outside. */
  get storeFile(): string {
    return path.join(this.dir, 'run', 'ovsnet', 'state.db');
  }

  async restartDockerd(dockerdArgs = ''): Promise<void> {
    await must('bash', [SCRIPT, 'restart-dockerd', this.name, this.dir], { ...process.env, DOCKERD_ARGS: dockerdArgs });
  }

  /** Restarts ovs-vswitchd, or stops or starts it (on the userspace datapath its underlay is down meanwhile). */
  async vswitchd(what: 'restart' | 'stop' | 'start'): Promise<void> {
    await must('bash', [SCRIPT, `${what}-vswitchd`, this.name, this.dir]);
  }

  async down(): Promise<void> {
    await run('bash', [SCRIPT, 'down', this.name, this.dir], { timeoutMs: 120_000 });
  }
}

/** POSTs a plugin call on a unix socket; resolves with status and parsed body. */
export function pluginCall(socketPath: string, method: string, body?: unknown): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, path: `/${method}`, method: 'POST', timeout: 5000 }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => {
        try {
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as unknown });
        } catch (err) {
          reject(err instanceof Error ? err : new Error(String(err)));
        }
      });
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error(`${method} timed out`)));
    req.end(body === undefined ? '' : JSON.stringify(body));
  });
}

/** The plugin under test: `ovsnet serve` as a child process, its JSON log kept in memory. */
export class Ovsnet {
  log = '';
  readonly exited: Promise<number | null>;

  private constructor(
    readonly child: ChildProcess,
    readonly socket: string,
  ) {
    child.stdout?.on('data', (d: Buffer) => (this.log += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (this.log += d.toString()));
    // 'close', not 'exit': the exit can be seen before the last of its stderr has been read.
    this.exited = new Promise((resolve) => child.on('close', (code) => resolve(code)));
  }

  /**
   * Starts ovsnet and waits until it answers Plugin.Activate on `socket` (a path as seen from
   * here; env may give OVSNET_SOCKET as seen from inside `wrap`).
   */
  static async start(socket: string, env: Record<string, string>, wrap: readonly string[] = []): Promise<Ovsnet> {
    const [cmd, ...args] = [...wrap, process.execPath, MAIN, 'serve'];
    const child = spawn(cmd ?? process.execPath, args, {
      env: { PATH: process.env.PATH ?? '', OVSNET_SOCKET: socket, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const o = new Ovsnet(child, socket);
    const deadline = Date.now() + 10_000;
    for (;;) {
      try {
        if (fs.existsSync(socket) && (await pluginCall(socket, 'Plugin.Activate')).status === 200) return o;
      } catch {
        // not up yet
      }
      if (child.exitCode !== null || Date.now() > deadline) {
        if (child.exitCode !== null) await o.exited; // all of its output read
        throw new Error(`ovsnet did not come up on ${socket}:\n${o.log}`);
      }
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  async kill(signal: NodeJS.Signals): Promise<number | null> {
    this.child.kill(signal);
    return this.exited;
  }
}

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
