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
import { describeStacks } from './dockerd-stacks.js';
import { launchFlags } from './launch.js';

export const SCRIPT = fileURLToPath(new URL('../../../test/harness/host.sh', import.meta.url));
export const MAIN = fileURLToPath(new URL('../../src/main.js', import.meta.url));
export const IMAGE = 'ovsnet-test/busybox:latest';
/** `docker network create` of an ovsnet network numbered by ovsnet's IPAM: the rest (subnet, options, name) follows. */
export const CREATE_OVSNET = ['network', 'create', '-d', 'ovsnet', '--ipam-driver', 'ovsnet'] as const;

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
    const limit = opts.timeoutMs ?? 120_000;
    let killed = false;
    const timer = setTimeout(() => {
      killed = true;
      child.kill('SIGKILL');
    }, limit);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      // A run killed at its bound says so (a failure's message read "failed (null):" and nothing).
      resolve({ code, stdout, stderr: killed ? `${stderr}(killed by the test harness after ${limit} ms)` : stderr });
    });
    // A command that exits without reading its input closes the pipe: that is no error.
    child.stdin.on('error', () => undefined);
    child.stdin.end(opts.input ?? '');
  });
}

export async function must(cmd: string, args: readonly string[], env?: NodeJS.ProcessEnv): Promise<Run> {
  const r = await run(cmd, args, env === undefined ? {} : { env });
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.code}):\n${r.stderr}${r.stdout}`);
  return r;
}

/** How many lines of ovsnet's and dockerd's logs a failed dockerOk quotes. */
const LOG_TAIL_LINES = 25;

export class DockerHost {
  /** The ovsnet startOvsnet() started last: its log goes into a failed dockerOk's message. */
  private lastOvsnet: Ovsnet | undefined;

  private constructor(
    readonly name: string,
    readonly dir: string,
  ) {}

  /** Path of the host's plugin socket directory as seen from outside the host. */
  /** The command prefix that runs a daemon inside the host: its network, mount and UTS namespaces. */
  get enter(): string[] {
    return ['nsenter', `--net=/run/netns/${this.name}`, `--mount=${this.dir}/mntns`, `--uts=${this.dir}/utsns`, '--'];
  }

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

  /**
   * docker ..., killed after `timeoutMs`: a bound on a hang, not a speed check. Beside the
   * cluster test's storm of 90 containers (load 50-57 on the 2 cores) a `docker run` after an
   * ovsnet restart went past 60 s.
   */
  docker(args: readonly string[], timeoutMs = 120_000): Promise<Run> {
    return run('docker', ['-H', `unix://${this.dir}/run/docker.sock`, ...args], { timeoutMs });
  }

  /** docker ..., failing the test with Docker's output when it fails. */
  async dockerOk(args: readonly string[], timeoutMs?: number): Promise<string> {
    const r = await this.docker(args, timeoutMs);
    if (r.code !== 0) {
      // Killed at its bound (no exit code): what dockerd was doing too.
      const stacks = r.code === null ? `\n${await this.stacks()}` : '';
      throw new Error(`docker ${args.join(' ')} failed (${r.code}): ${r.stderr}${this.logTails()}${stacks}`);
    }
    return r.stdout.trim();
  }

  /**
   * What dockerd is doing, for a command the harness killed: its goroutines (SIGUSR1 makes it
   * write them to a file it names in its log), read for the deadlock known in 20.10.24
   * (dockerd-stacks.ts). Waits up to 10 s for the file.
   */
  async stacks(): Promise<string> {
    const log = path.join(this.dir, 'log', 'dockerd.log');
    try {
      const from = fs.statSync(log).size;
      process.kill(Number(fs.readFileSync(path.join(this.dir, 'dockerd.pid'), 'utf8')), 'SIGUSR1');
      for (let waited = 0; waited < 10_000; waited += 200) {
        await new Promise((r) => setTimeout(r, 200));
        const written = /goroutine stacks written to ([^"\s]+)/.exec(fs.readFileSync(log, 'utf8').slice(from));
        if (written?.[1] === undefined) continue;
        // dockerd names its path inside the host: /run and /var/lib/docker are the host's own.
        const outside = written[1]
          .replace(/^(\/var)?\/run\//, `${this.dir}/run/`)
          .replace(/^\/var\/lib\/docker\//, `${this.dir}/lib-docker/`);
        return describeStacks(fs.readFileSync(outside, 'utf8'), written[1]);
      }
      return "--- dockerd's goroutines: it wrote none within 10 s of SIGUSR1 ---";
    } catch (err) {
      return `--- dockerd's goroutines: not read (${String(err)}) ---`;
    }
  }

  /** The last lines of ovsnet's and dockerd's logs, for a failure's message: what a CI log keeps. */
  logTails(): string {
    const last = (text: string) => text.split('\n').slice(-LOG_TAIL_LINES).join('\n');
    const dockerd = (() => {
      try {
        return last(fs.readFileSync(path.join(this.dir, 'log', 'dockerd.log'), 'utf8'));
      } catch {
        return '(none)';
      }
    })();
    const ovsnet = this.lastOvsnet === undefined ? '(none started)' : last(this.lastOvsnet.log);
    return `\n--- ovsnet's log, last lines ---\n${ovsnet}\n--- dockerd's log, last lines ---\n${dockerd}`;
  }

  exec(args: readonly string[]): Promise<Run> {
    return run('bash', [SCRIPT, 'exec', this.name, this.dir, '--', ...args]);
  }

  /**
   * Starts ovsnet inside the host (its network and mount namespaces), serving the host's
   * plugin directory, with the embedded store in the host's /run unless `env` says otherwise.
   * `main`: another build's entry point (an earlier version, for upgrades); `flags`: node's
   * (the ones its plugin/config.json gives unless said).
   */
  async startOvsnet(env: Record<string, string> = {}, main = MAIN, flags?: readonly string[], session: Session = 'own'): Promise<Ovsnet> {
    this.lastOvsnet = await Ovsnet.start(
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
      this.enter,
      main,
      flags,
      session,
    );
    return this.lastOvsnet;
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
/**
 * The session a daemon starts in. 'own' (setsid), as every launcher runs ovsnet: systemd's
 * service, the managed plugin's runc, a terminal of its own. Linux's autogroup scheduling
 * (CONFIG_SCHED_AUTOGROUP, on in Debian's kernels) weighs each session as one group: in the
 * caller's session ('caller'), a daemon would be one task among the test's own processes (a
 * storm's 100 `docker run` clients) instead of a group of its own (docs/benchmarks.md, cluster).
 */
export type Session = 'own' | 'caller';

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
  static async start(
    socket: string,
    env: Record<string, string>,
    wrap: readonly string[] = [],
    main = MAIN,
    flags: readonly string[] = launchFlags(main),
    session: Session = 'own',
  ): Promise<Ovsnet> {
    // SIGTERM when the process that started it dies (a test file killed at its timeout): no
    // daemon outlives its test. setpriv sets it and execs; the signal stays across execs.
    const [cmd, ...args] = ['setpriv', '--pdeathsig', 'TERM', '--', ...wrap, process.execPath, ...flags, main, 'serve'];
    const child = spawn(cmd ?? process.execPath, args, {
      // The journal beside the socket, in the test's own directory (its default is the machine's /var/lib).
      env: {
        PATH: process.env.PATH ?? '',
        OVSNET_SOCKET: socket,
        OVSNET_JOURNAL: path.join(path.dirname(socket), 'unconfirmed.json'),
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: session === 'own',
    });
    const o = new Ovsnet(child, socket);
    // A wait, not a speed check (the lifecycle test bounds the start, run alone): beside other
    // test files a restart on a cluster host did not answer within 10 s at a load of 16 on the 2
    // cores, and one beside the cluster test's 90-container storm (load 50-57) not within 30 s.
    const deadline = Date.now() + 90_000;
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
