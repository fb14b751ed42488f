/**
 * A Docker swarm on the simulated hosts of a Cluster: the managed plugin (built once by
 * `npm run plugin:build`) installed on every host with OVSNET_SCOPE=global and the cluster's
 * etcd, then `docker swarm init` on the first host and `swarm join` on the others, as managers or
 * workers. Node i is host i of the cluster; ovsnet knows it as `n<i+1>`.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Cluster } from './cluster.js';
import { run, type DockerHost } from './host.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));

export interface SwarmOptions {
  /** How many of the hosts are managers (the first ones); the rest are workers. */
  readonly managers: number;
  readonly hosts: number;
  /** Extra plugin settings, e.g. OVSNET_VXLAN_PORT. */
  readonly env?: Readonly<Record<string, string>>;
}

export class Swarm {
  private constructor(
    readonly cluster: Cluster,
    private readonly pluginDir: string,
  ) {}

  static async up(prefix: string, opts: SwarmOptions): Promise<Swarm> {
    const pluginDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-swarm-plugin-'));
    const build = await run('bash', [`${root}scripts/plugin-build.sh`, pluginDir], { timeoutMs: 300_000 });
    if (build.code !== 0) {
      fs.rmSync(pluginDir, { recursive: true, force: true });
      throw new Error(`plugin:build failed:\n${build.stderr}`);
    }
    let cluster: Cluster;
    try {
      cluster = await Cluster.up(prefix, opts.hosts);
    } catch (err) {
      fs.rmSync(pluginDir, { recursive: true, force: true });
      throw err;
    }
    cluster.removeWith(pluginDir);
    const swarm = new Swarm(cluster, pluginDir);
    try {
      await Promise.all(cluster.hosts.map((_, i) => swarm.installPlugin(i, opts.env ?? {})));
      await swarm.form(opts.managers);
    } catch (err) {
      await swarm.down();
      throw err;
    }
    return swarm;
  }

  host(i: number): DockerHost {
    const h = this.cluster.hosts[i];
    if (h === undefined) throw new Error(`no host ${i}`);
    return h;
  }

  /** The plugin's own state directory on host i (outside the host: /tmp/ovsnet-host-*). */
  stateDir(i: number): string {
    return path.join(this.host(i).dir, 'plugin-state');
  }

  private async installPlugin(i: number, env: Readonly<Record<string, string>>): Promise<void> {
    const h = this.host(i);
    const secrets = path.join(h.dir, 'plugin-secrets');
    fs.mkdirSync(this.stateDir(i), { mode: 0o700 });
    fs.mkdirSync(secrets, { mode: 0o700 });
    await h.dockerOk(['plugin', 'create', 'ovsnet', this.pluginDir]);
    const settings = {
      OVSNET_STORE: this.cluster.store,
      OVSNET_SCOPE: 'global',
      OVSNET_HOST: `n${i + 1}`,
      OVSNET_VTEP_IP: this.cluster.addresses[i] ?? '',
      // A node that dies is gone from its peers within 3 s, its memberships reclaimed 5 s later.
      OVSNET_HOST_TTL: '3',
      OVSNET_RECLAIM_GRACE: '5',
      ...env,
    };
    await h.dockerOk([
      'plugin',
      'set',
      'ovsnet',
      `state.source=${this.stateDir(i)}`,
      `secrets.source=${secrets}`,
      ...Object.entries(settings).map(([k, v]) => `${k}=${v}`),
    ]);
    await h.dockerOk(['plugin', 'enable', 'ovsnet']);
  }

  private async form(managers: number): Promise<void> {
    const first = this.host(0);
    const addr = (i: number) => this.cluster.addresses[i] ?? '';
    // Nodes report every second (Docker's default: 5 s), so a dead node is marked down in about 3 s
    // rather than 15 (the heartbeat's period times swarmkit's grace of 3).
    await first.dockerOk([
      'swarm',
      'init',
      '--advertise-addr',
      addr(0),
      '--listen-addr',
      `${addr(0)}:2377`,
      '--dispatcher-heartbeat',
      '1s',
    ]);
    const token = {
      manager: await first.dockerOk(['swarm', 'join-token', '-q', 'manager']),
      worker: await first.dockerOk(['swarm', 'join-token', '-q', 'worker']),
    };
    // One at a time: a manager joining changes the raft membership the next join is checked against.
    for (let i = 1; i < this.cluster.hosts.length; i++) {
      const role = i < managers ? 'manager' : 'worker';
      await this.host(i).dockerOk(['swarm', 'join', '--token', token[role], '--advertise-addr', addr(i), `${addr(0)}:2377`]);
    }
  }

  /** Stops host i's dockerd (SIGTERM, by its recorded PID): a manager stopped mid-run. */
  async stopDockerd(i: number): Promise<void> {
    const pid = Number(fs.readFileSync(path.join(this.host(i).dir, 'dockerd.pid'), 'utf8'));
    process.kill(pid, 'SIGTERM');
    for (let n = 0; n < 300 && alive(pid); n++) await new Promise((r) => setTimeout(r, 100));
  }

  /** What ovsnet logged on host i (a managed plugin's output goes to dockerd's log). */
  pluginLog(i: number): string {
    return fs.readFileSync(path.join(this.host(i).dir, 'log', 'dockerd.log'), 'utf8');
  }

  async down(): Promise<void> {
    await this.cluster.down();
    fs.rmSync(this.pluginDir, { recursive: true, force: true });
  }
}

/** Whether a process runs (PID 1 here reaps late: a zombie counts as gone, docs/test-hosts.md). */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \([^)]*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}
