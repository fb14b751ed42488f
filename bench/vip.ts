/**
 * `npm run bench -- vip`: swarm service VIPs as ovsnet balances them, on a three-node swarm of the
 * test hosts (the managed plugin, OVSNET_SCOPE=global, etcd):
 *
 * 1. TCP connections per second from a container on node 1 through a service's VIP (4 tasks over
 *    the three nodes) against straight to a task's address (one on node 1, one on another node),
 *    the same client and servers in the same run: one connection at a time (each pays the whole
 *    path: ARP cached, conntrack, the group, the tunnel), and 16 at a time. The client and the
 *    servers are Node processes of this machine run in the containers' network namespaces
 *    (nsenter -n), so that neither side's process start is measured.
 * 2. From `docker service scale` returning to the VIP's select group holding the new number of
 *    tasks on every node (read by ovs-ofctl every 50 ms): up 4 -> 8, down 8 -> 2.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { IMAGE } from '../test/harness/host.js';
import { Swarm } from '../test/harness/swarm.js';
import { fmt, median, table } from './stats.js';

const NET = 'bnet';
const PORT = 7070;
const SECONDS = 5;

const SERVER = `
const net = require('node:net');
net.createServer((s) => { s.on('error', () => {}); s.end('x'); }).listen(${PORT}, () => console.log('listening'));
`;

/**
 * Connects to host:port again and again for `seconds` with `parallel` at a time; prints
 * connections/s, each connection's p50 and p99 (connect to close, ms) and failures (no answer
 * within 5 s: a lost SYN is retransmitted after 1 s, so a slow one still counts, in the p99).
 */
const CLIENT = `
const net = require('node:net');
const [host, port, seconds, parallel] = process.argv.slice(2);
const end = Date.now() + Number(seconds) * 1000;
let ok = 0, failed = 0;
const ms = [];
const one = () => new Promise((resolve) => {
  const t0 = process.hrtime.bigint();
  const s = net.connect(Number(port), host);
  s.setTimeout(5000, () => s.destroy(new Error('timeout')));
  s.on('data', () => {});
  s.on('end', () => { ok++; ms.push(Number(process.hrtime.bigint() - t0) / 1e6); resolve(); });
  s.on('error', () => { failed++; resolve(); });
});
const worker = async () => { while (Date.now() < end) await one(); };
const t0 = Date.now();
Promise.all(Array.from({ length: Number(parallel) }, worker)).then(() => {
  ms.sort((a, b) => a - b);
  const q = (p) => ms[Math.min(ms.length - 1, Math.ceil(p * ms.length) - 1)] ?? NaN;
  console.log(JSON.stringify({ perSecond: ok / ((Date.now() - t0) / 1000), failed, p50: q(0.5), p99: q(0.99) }));
});
`;

async function pidOf(swarm: Swarm, host: number, container: string): Promise<number> {
  return Number(await swarm.host(host).dockerOk(['inspect', '-f', '{{.State.Pid}}', container]));
}

function inNetns(pid: number, script: string, args: readonly string[]) {
  return spawn('nsenter', ['-t', String(pid), '-n', process.execPath, script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
}

type ClientResult = { perSecond: number; failed: number; p50: number; p99: number };

async function runClient(pid: number, script: string, to: string, parallel: number): Promise<ClientResult> {
  const child = inNetns(pid, script, [to, String(PORT), String(SECONDS), String(parallel)]);
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  await new Promise((r) => child.on('close', r));
  const last = out.trim().split('\n').at(-1) ?? '';
  if (last === '') throw new Error(`the client to ${to} printed nothing: ${err}`);
  return JSON.parse(last) as ClientResult;
}

/** How many buckets the VIP's group has on host i (the one group with a bucket per task of `tasks`). */
async function buckets(swarm: Swarm, i: number, vip: string): Promise<number> {
  const r = await swarm.host(i).exec(['ovs-ofctl', '-O', 'OpenFlow15', 'dump-groups', 'ovsnet0']);
  const flows = await swarm.host(i).exec(['ovs-ofctl', '-O', 'OpenFlow13', 'dump-flows', 'ovsnet0', 'table=51']);
  const reg = `reg10=0x${Buffer.from(vip.split('.').map(Number)).toString('hex').replace(/^0+/, '')}`;
  const group = new RegExp(`${reg}.*actions=group:(\\d+)`).exec(flows.stdout)?.[1];
  if (group === undefined) return 0;
  const line = r.stdout.split('\n').find((l) => l.includes(`group_id=${group},`)) ?? '';
  return line.split('bucket=').length - 1;
}

async function scaleTime(swarm: Swarm, vip: string, to: number): Promise<number[]> {
  const t0 = Date.now();
  await swarm.host(0).dockerOk(['service', 'scale', '-d', `b=${to}`]);
  const done: number[] = [NaN, NaN, NaN];
  while (done.some((d) => Number.isNaN(d)) && Date.now() - t0 < 120_000) {
    await Promise.all(
      [0, 1, 2].map(async (i) => {
        if (Number.isNaN(done[i]) && (await buckets(swarm, i, vip)) === to) done[i] = Date.now() - t0;
      }),
    );
    await new Promise((r) => setTimeout(r, 50));
  }
  return done;
}

export async function benchVip(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-bench-vip-'));
  const server = path.join(dir, 'server.cjs');
  const client = path.join(dir, 'client.cjs');
  fs.writeFileSync(server, SERVER);
  fs.writeFileSync(client, CLIENT);
  const swarm = await Swarm.up('bv', { managers: 1, hosts: 3, env: { OVSNET_VXLAN_PORT: '4790' } });
  const servers: ReturnType<typeof spawn>[] = [];
  try {
    const mgr = swarm.host(0);
    await mgr.dockerOk(['network', 'create', '-d', 'ovsnet:latest', '--scope', 'swarm', '--attachable', '--subnet', '10.97.0.0/24', NET]);
    const service = ['--name', 'b', '--network', NET, '--replicas', '4', IMAGE, 'sleep', '3600'];
    await mgr.dockerOk(['service', 'create', '-d', '--no-resolve-image', ...service]);
    await mgr.dockerOk(['run', '-d', '--name', 'bc', '--network', NET, IMAGE, 'sleep', '3600']);
    const vip =
      (
        JSON.parse(await mgr.dockerOk(['service', 'inspect', '-f', '{{json .Endpoint.VirtualIPs}}', 'b'])) as { Addr: string }[]
      )[0]?.Addr.split('/')[0] ?? '';
    // The tasks, with a server each in their network namespace.
    const tasks: { host: number; ip: string }[] = [];
    const served = new Set<string>();
    for (let tries = 0; tries < 240 && served.size < 4; tries++) {
      for (const i of [0, 1, 2]) {
        const ids = (await swarm.host(i).dockerOk(['ps', '-q', '--filter', 'label=com.docker.swarm.service.name=b']))
          .split('\n')
          .filter(Boolean);
        for (const id of ids.filter((x) => !served.has(x))) {
          const ip = await swarm.host(i).dockerOk(['inspect', '-f', `{{(index .NetworkSettings.Networks "${NET}").IPAddress}}`, id]);
          if (ip === '') continue;
          const s = inNetns(await pidOf(swarm, i, id), server, []);
          servers.push(s);
          const up = await Promise.race([
            new Promise((r) => s.stdout?.once('data', () => r(true))),
            new Promise((r) => setTimeout(() => r(false), 10_000)),
          ]);
          if (up !== true) throw new Error(`the server in task ${id} on node ${i + 1} did not start`);
          served.add(id);
          tasks.push({ host: i, ip });
        }
      }
      if (served.size < 4) await new Promise((r) => setTimeout(r, 500));
    }
    const bc = await pidOf(swarm, 0, 'bc');
    const local = tasks.find((x) => x.host === 0) ?? tasks[0];
    const remote = tasks.find((x) => x.host !== 0) ?? tasks[0];
    // The VIP programmed on node 1 (the Engine read every 0.5 s).
    for (let i = 0; i < 60 && (await buckets(swarm, 0, vip)) !== 4; i++) await new Promise((r) => setTimeout(r, 250));
    const rows: string[][] = [];
    for (const parallel of [1, 16]) {
      const direct = await runClient(bc, client, remote?.ip ?? '', parallel);
      const near = await runClient(bc, client, local?.ip ?? '', parallel);
      const through = await runClient(bc, client, vip, parallel);
      const row = (what: string, r: ClientResult) => [
        String(parallel),
        what,
        fmt(r.perSecond, 0),
        fmt(r.perSecond / direct.perSecond, 2),
        fmt(r.p50, 2),
        fmt(r.p99, 1),
        String(r.failed),
      ];
      rows.push(
        row(`a task on another node (${remote?.ip ?? ''})`, direct),
        row(`a task on the same node (${local?.ip ?? ''})`, near),
        row(`the VIP (${vip}, 4 tasks on 3 nodes)`, through),
      );
    }
    console.log(
      `TCP connections from a container on node 1, ${SECONDS} s each (connect, one byte, close); load average ${os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')} on ${os.cpus().length} cores`,
    );
    console.log(table(['at once', 'to', 'connections/s', 'vs another node', 'p50 ms', 'p99 ms', 'failed (5 s)'], rows));
    const up = await scaleTime(swarm, vip, 8);
    const down = await scaleTime(swarm, vip, 2);
    console.log('\nFrom `docker service scale` returning to the VIP group holding that many tasks, per node (ms)');
    console.log(
      table(
        ['change', 'node 1', 'node 2', 'node 3', 'median'],
        [
          ['4 -> 8', ...up.map((d) => fmt(d, 0)), fmt(median(up), 0)],
          ['8 -> 2', ...down.map((d) => fmt(d, 0)), fmt(median(down), 0)],
        ],
      ),
    );
    console.log(
      '(a scale includes swarm scheduling the tasks and starting their containers: the figure is what a user waits for, not ovsnet alone; ovsnet reads the Engine every 0.5 s)',
    );
  } finally {
    for (const s of servers) s.kill();
    await swarm.down();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
