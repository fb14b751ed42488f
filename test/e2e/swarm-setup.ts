/** Helpers of the swarm tests: services, their tasks and addresses, ovsnet's ports and keys. */
import type { Swarm } from '../harness/swarm.js';

export const NET = 'app';

export async function until(cond: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 250));
  }
  return true;
}

export interface Task {
  readonly host: number;
  readonly container: string;
  readonly ip: string;
}

export class SwarmView {
  constructor(
    readonly swarm: Swarm,
    /** Hosts whose dockerd answers (a stopped one is left out). */
    readonly live: number[],
  ) {}

  /** Running containers of `service` on every live host, with their address on `net`. */
  async tasks(service: string, net = NET): Promise<Task[]> {
    const out: Task[] = [];
    for (const i of this.live) {
      const h = this.swarm.host(i);
      const ids = (await h.docker(['ps', '-q', '--filter', `label=com.docker.swarm.service.name=${service}`])).stdout
        .split('\n')
        .filter(Boolean);
      for (const id of ids) {
        const ip = (
          await h.docker(['inspect', '-f', `{{with index .NetworkSettings.Networks "${net}"}}{{.IPAddress}}{{end}}`, id])
        ).stdout.trim();
        out.push({ host: i, container: id, ip });
      }
    }
    return out;
  }

  /** Waits until `service` runs `n` tasks (on the live hosts); throws with `docker service ps` otherwise. */
  async converge(manager: number, service: string, n: number, ms = 60_000): Promise<Task[]> {
    let tasks: Task[] = [];
    const ok = await until(async () => {
      tasks = await this.tasks(service);
      return tasks.length === n && tasks.every((t) => t.ip !== '');
    }, ms);
    if (!ok) {
      const ps = await this.swarm.host(manager).docker(['service', 'ps', '--no-trunc', service]);
      throw new Error(`service ${service} did not reach ${n} tasks (has ${tasks.length}):\n${ps.stdout}${ps.stderr}`);
    }
    return tasks;
  }

  /** ovsnet's endpoint ports ('ovh...') and tunnel ports ('ovx...') on host i. */
  async ports(i: number): Promise<{ endpoints: number; tunnels: number }> {
    const r = await this.swarm.host(i).exec(['ovs-vsctl', 'list-ports', 'ovsnet0']);
    if (r.code !== 0 && !r.stderr.includes('no bridge named')) throw new Error(`ovs-vsctl list-ports on host ${i + 1}: ${r.stderr}`);
    const names = r.stdout.split('\n').filter(Boolean);
    return { endpoints: names.filter((n) => n.startsWith('ovh')).length, tunnels: names.filter((n) => n.startsWith('ovx')).length };
  }

  /** Docker's endpoints on host i in ovsnet networks (tasks, containers, swarm's load balancers). */
  async held(i: number): Promise<number> {
    const h = this.swarm.host(i);
    const nets = (await h.docker(['network', 'ls', '-q', '--filter', 'driver=ovsnet:latest'])).stdout.split('\n').filter(Boolean);
    let n = 0;
    for (const id of nets) {
      const r = await h.docker(['network', 'inspect', '-f', '{{len .Containers}}', id]);
      if (r.code === 0) n += Number(r.stdout.trim());
    }
    return n;
  }

  /** Keys under ovsnet's `prefix` (e.g. 'logical/') in the shared etcd, read over its JSON gateway. */
  async keys(prefix: string): Promise<string[]> {
    const b64 = (s: string) => Buffer.from(s).toString('base64');
    const from = `/ovsnet/v1/${prefix}`;
    const end = from.slice(0, -1) + String.fromCharCode(from.charCodeAt(from.length - 1) + 1);
    const body = JSON.stringify({ key: b64(from), range_end: b64(end), keys_only: true });
    const r = await this.swarm.host(0).exec(['wget', '-q', '-O', '-', `--post-data=${body}`, 'http://127.0.0.1:2379/v3/kv/range']);
    const kvs = (JSON.parse(r.stdout || '{}') as { kvs?: { key: string }[] }).kvs ?? [];
    return kvs.map((kv) => Buffer.from(kv.key, 'base64').toString());
  }
}

/** `ping` from a container on host i; true when a reply came. */
export async function pings(swarm: Swarm, i: number, container: string, to: string): Promise<boolean> {
  return (await swarm.host(i).docker(['exec', container, 'ping', '-c', '1', '-W', '2', to])).code === 0;
}

/** The addresses `name` resolves to through Docker's embedded DNS, seen from a container on host i. */
export async function resolve(swarm: Swarm, i: number, container: string, name: string): Promise<string[]> {
  const r = await swarm.host(i).docker(['exec', container, 'busybox', 'nslookup', name, '127.0.0.11']);
  // busybox prints the server first ("Server: 127.0.0.11", "Address: 127.0.0.11:53"), then the answers.
  const answers = r.stdout
    .split(/\n\s*\n/)
    .slice(1)
    .join('\n');
  return [...answers.matchAll(/Address(?: \d+)?:\s*([0-9.]+)\s*$/gm)].map((m) => m[1] ?? '').sort();
}
