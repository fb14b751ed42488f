/**
 * Docker swarm mode: one manager and two workers, each with the managed plugin
 * (OVSNET_SCOPE=global, one etcd), ovsnet's tunnels on UDP 4790 beside swarm's own VXLAN on 4789.
 * A swarm network is created once on the manager; services' tasks on different nodes talk, names
 * resolve to the VIP (dnsrr: to the tasks), a standalone container on any node reaches them,
 * scaling leaks nothing, a drained or killed node's tasks come back elsewhere with no address
 * twice, `docker stack deploy` works, and `docker network rm` frees the VNI. Midway the workers are
 * promoted and the leader is stopped: the swarm of three managers carries on (one file, one swarm:
 * a second one would cost a minute of the five the swarm tests may take).
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { IMAGE, MAIN } from '../harness/host.js';
import { Swarm } from '../harness/swarm.js';
import { NET, pings, resolve, SwarmView, until } from './swarm-setup.js';

const t0 = Date.now();
const swarm = await Swarm.up('sw', { managers: 1, hosts: 3, env: { OVSNET_VXLAN_PORT: '4790' } });
t.teardown(() => swarm.down());
t.comment(`swarm of 3 formed in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
const view = new SwarmView(swarm, [0, 1, 2]);
const mgr = swarm.host(0);
const SUBNET = '10.90.0.0/24';
const inSubnet = (ip: string) => /^10\.90\.0\.\d+$/.test(ip);
/**
 * A task's PID 1 (sleep, httpd) ignores SIGTERM: its tasks are killed 1 s after, not Docker's 10 s
 * (each scale-down, drain and rolling update waited for it).
 */
const QUICK_STOP = ['--stop-grace-period', '1s'];
const service = (name: string, args: readonly string[]) =>
  mgr.dockerOk([
    'service',
    'create',
    '-d',
    '--no-resolve-image',
    '--name',
    name,
    '--network',
    NET,
    ...QUICK_STOP,
    ...args,
    IMAGE,
    'sleep',
    '3600',
  ]);

t.test('a swarm network, created once on the manager', async (t) => {
  await mgr.dockerOk(['network', 'create', '-d', 'ovsnet:latest', '--scope', 'swarm', '--attachable', '--subnet', SUBNET, NET]);
  // The manager's allocator calls AllocateNetwork soon after the create returns.
  t.ok(await until(async () => (await view.keys('logical/')).length === 1, 10_000), 'its VNI is claimed in the store');
  t.ok(
    await until(
      async () => (await mgr.dockerOk(['network', 'inspect', '-f', '{{.Scope}} {{.Driver}}', NET])) === 'swarm ovsnet:latest',
      10_000,
    ),
    'a swarm network of ovsnet',
  );
});

t.test("refused, with what to use instead: --opt encrypted, ovsnet's IPAM; their tasks never start", async (t) => {
  const cases = [
    ['enc', ['--opt', 'encrypted'], /ovsnet does not encrypt its VXLAN tunnels.*use Docker's overlay driver/],
    ['oipam', ['--ipam-driver', 'ovsnet:latest'], /ovsnet's IPAM does not number swarm networks.*without --ipam-driver/],
  ] as const;
  for (const [name, opts, message] of cases) {
    await mgr.dockerOk(['network', 'create', '-d', 'ovsnet:latest', '--scope', 'swarm', '--subnet', '10.94.0.0/24', ...opts, name]);
    const created = await mgr.docker([
      'service',
      'create',
      '-d',
      '--no-resolve-image',
      '--name',
      `s-${name}`,
      '--network',
      name,
      IMAGE,
      'sleep',
      '600',
    ]);
    // The manager's log (where a plugin's output goes) says why.
    const said = await until(async () => message.test(swarm.pluginLog(0).replace(/\\"/g, '"')), 15_000);
    t.ok(said, `the manager's log says why (${name})`);
    await new Promise((r) => setTimeout(r, 3000)); // a task that could start would have by now
    const state = (await mgr.docker(['service', 'ps', '--format', '{{.CurrentState}} {{.Error}}', `s-${name}`])).stdout.trim();
    t.notMatch(state, /Running/, `no task runs: ${created.code === 0 ? state : created.stderr.trim()}`);
    await mgr.docker(['service', 'rm', `s-${name}`]);
    await until(async () => (await mgr.docker(['network', 'rm', name])).code === 0, 15_000);
  }
  t.equal((await view.keys('tags/vni/')).length, 1, "no VNI claimed but app's");
});

t.test('tasks on different nodes get addresses of the subnet, each once, and talk', async (t) => {
  await service('web', ['--replicas', '6']);
  const tasks = await view.converge(0, 'web', 6);
  t.ok(
    tasks.every((x) => inSubnet(x.ip)),
    `every task in ${SUBNET}: ${tasks.map((x) => x.ip).join(' ')}`,
  );
  t.equal(new Set(tasks.map((x) => x.ip)).size, tasks.length, 'no address twice');
  t.equal(new Set(tasks.map((x) => x.host)).size, 3, 'on all three nodes');
  // For docs/swarm.md: what a user and an operator see.
  t.comment(await mgr.dockerOk(['service', 'ps', '--format', 'table {{.Name}}\t{{.Node}}\t{{.CurrentState}}', 'web']));
  const cli = await swarm.host(1).exec(['env', `OVSNET_STORE=${swarm.cluster.store}`, process.execPath, MAIN, 'networks']);
  t.comment(cli.stdout);
  for (const a of tasks) {
    const b = tasks.find((x) => x.host !== a.host);
    if (b !== undefined) t.ok(await pings(swarm, a.host, a.container, b.ip), `node ${a.host + 1} -> node ${b.host + 1}`);
  }
});

// Names resolve to the VIP (ovsnet load-balances it in OVS: the next test), dnsrr services and
// tasks.NAME to the tasks.
t.test('service names resolve to the VIP, tasks.NAME and dnsrr services to the tasks', async (t) => {
  const tasks = await view.tasks('web');
  const vips = JSON.parse(await mgr.dockerOk(['service', 'inspect', '-f', '{{json .Endpoint.VirtualIPs}}', 'web'])) as { Addr: string }[];
  const vip = vips[0]?.Addr.split('/')[0] ?? '';
  t.ok(inSubnet(vip), `the VIP ${vip} is in the subnet`);
  t.notOk(
    tasks.some((x) => x.ip === vip),
    'and no task has it',
  );
  const a = tasks[0];
  if (a === undefined) throw new Error('no task');
  t.same(await resolve(swarm, a.host, a.container, 'web'), [vip], 'web -> VIP');
  t.same(await resolve(swarm, a.host, a.container, 'tasks.web'), tasks.map((x) => x.ip).sort(), 'tasks.web -> the tasks');
  await service('db', ['--replicas', '2', '--endpoint-mode', 'dnsrr']);
  const db = await view.converge(0, 'db', 2);
  t.ok(
    await until(
      async () =>
        (await resolve(swarm, a.host, a.container, 'db')).join() ===
        db
          .map((x) => x.ip)
          .sort()
          .join(),
      10_000,
    ),
    'db (dnsrr) -> its tasks',
  );
});

// A default-mode service: dockerd makes no load balancer for a driver other than overlay; ovsnet
// reads the VIP and its tasks from each node's Engine and load-balances in OVS (docs/swarm.md).
const HTTPD = ['sh', '-c', 'mkdir -p /www && hostname > /www/index.html && exec busybox httpd -f -p 80 -h /www'];
/** `n` connections to `to`:80 in a row from a container on node i: each answer (a task's hostname) or 'FAIL'. */
async function fetchMany(i: number, container: string, to: string, n: number, pause = 0): Promise<string[]> {
  const loop = `for i in $(seq ${n}); do printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 2 ${to} 80 | tail -n 1 | grep . || echo FAIL; ${pause > 0 ? `sleep ${pause}` : ':'}; done`;
  const r = await swarm.host(i).docker(['exec', container, 'sh', '-c', loop]);
  return r.stdout.split('\n').filter(Boolean);
}
const vips = new Map<string, string>();
/** A service's VIP, as its service record has it (kept: a service scaled to 0 still has it). */
const vipOf = (service: string): string => vips.get(service) ?? service;
async function readVip(service: string): Promise<string> {
  const listed = JSON.parse(await mgr.dockerOk(['service', 'inspect', '-f', '{{json .Endpoint.VirtualIPs}}', service])) as {
    Addr: string;
  }[];
  const vip = listed[0]?.Addr.split('/')[0] ?? '';
  vips.set(service, vip);
  return vip;
}
/** ovsnet's VIP flows (cookie 0x0f61...) and select groups on node i. */
async function vipState(i: number): Promise<{ flows: number; groups: number }> {
  const h = swarm.host(i);
  const flows = await h.exec(['ovs-ofctl', '-O', 'OpenFlow13', 'dump-flows', 'ovsnet0', 'cookie=0x0f61000000000000/0xffff000000000000']);
  const groups = await h.exec(['ovs-ofctl', '-O', 'OpenFlow15', 'dump-groups', 'ovsnet0']);
  return {
    flows: flows.stdout.split('\n').filter((l) => l.includes('cookie=')).length,
    groups: groups.stdout.split('\n').filter((l) => /group_id=/.test(l)).length,
  };
}

t.test('a service in its default mode (VIP): load-balanced over its tasks from every node, a task reaching itself', async (t) => {
  const before = await Promise.all([0, 1, 2].map(vipState));
  await mgr.dockerOk([
    'service',
    'create',
    '-d',
    '--no-resolve-image',
    '--name',
    'lb',
    '--network',
    NET,
    '--replicas',
    '4',
    ...QUICK_STOP,
    IMAGE,
    ...HTTPD,
  ]);
  const tasks = await view.converge(0, 'lb', 4);
  await readVip('lb');
  const names = new Set(tasks.map((x) => x.container.slice(0, 12)));
  for (const i of [0, 1, 2]) await swarm.host(i).dockerOk(['run', '-d', '--name', `cl${i}`, '--network', NET, IMAGE, 'sleep', '600']);
  // The VIP is programmed once each node's Engine lists the tasks (read every 0.5 s).
  t.ok(await until(async () => (await fetchMany(0, 'cl0', 'lb', 1))[0] !== 'FAIL', 15_000), 'lb answers through its VIP');
  for (const i of [0, 1, 2]) {
    const got = await fetchMany(i, `cl${i}`, 'lb', 200);
    const counts = new Map<string, number>();
    for (const g of got) counts.set(g, (counts.get(g) ?? 0) + 1);
    t.equal(got.filter((g) => g === 'FAIL').length, 0, `node ${i + 1}: 200 connections to lb:80, every one answered`);
    t.ok(
      [...names].every((n) => (counts.get(n) ?? 0) >= 20) && [...counts.keys()].every((n) => names.has(n)),
      `node ${i + 1}: spread over all 4 tasks, none under 10%: ${JSON.stringify(Object.fromEntries(counts))}`,
    );
  }
  const self = tasks[0];
  if (self === undefined) throw new Error('no task');
  const own = await fetchMany(self.host, self.container, 'lb', 40);
  t.equal(own.filter((g) => g === 'FAIL').length, 0, 'a task reaching its own service by name: every connection answered');
  t.ok(own.includes(self.container.slice(0, 12)), `including by itself (hairpin): ${[...new Set(own)].join(' ')}`);
  const traced = await swarm
    .host(0)
    .exec(['env', `OVSNET_STORE=${swarm.cluster.store}`, process.execPath, MAIN, 'trace', 'cl0', 'lb:80/tcp', '-o', 'json']);
  t.match(
    (JSON.parse(traced.stdout || '{}') as { verdict?: string }).verdict,
    /^load-balanced over the VIP's tasks/,
    `ovsnet trace cl0 lb:80/tcp on node 1 (the service name through the daemon's VIPs): ${traced.stdout.slice(0, 300)}${traced.stderr}`,
  );
  const ping = await swarm.host(1).docker(['exec', 'cl1', 'ping', '-c', '1', '-W', '2', 'lb']);
  t.equal(ping.code, 0, 'the VIP answers ping (a task does)');

  // Scaled to 1 and back to 6 while a client keeps connecting: never an answer from a task that is
  // gone once the change is seen, and under a second of failures per change.
  const slow = fetchMany(2, 'cl2', 'lb', 160, 0.1);
  await mgr.dockerOk(['service', 'scale', '-d', 'lb=1']);
  const one = await view.converge(0, 'lb', 1);
  await new Promise((r) => setTimeout(r, 1500));
  const after1 = await fetchMany(0, 'cl0', 'lb', 20);
  t.same([...new Set(after1)], [one[0]?.container.slice(0, 12)], 'scaled to 1: only the remaining task answers');
  await mgr.dockerOk(['service', 'scale', '-d', 'lb=6']);
  const six = await view.converge(0, 'lb', 6);
  await new Promise((r) => setTimeout(r, 1500));
  const after6 = new Set(await fetchMany(0, 'cl0', 'lb', 120));
  t.ok(
    six.every((x) => after6.has(x.container.slice(0, 12))) && !after6.has('FAIL'),
    `scaled to 6: every task answers, nothing fails (${after6.size} answering)`,
  );
  const during = await slow;
  const failed = during.filter((g) => g === 'FAIL').length;
  t.comment(`a client connecting every 0.1 s through both changes: ${during.length - failed} answered, ${failed} failed`);
  t.ok(failed <= 10, `at most about a second of failures per change (${failed} of ${during.length} at 0.1 s apart)`);

  // ovs-vswitchd restarted on node 2: the VIP's flows and group are back with the rest.
  await swarm.host(1).vswitchd('restart');
  t.ok(
    await until(async () => (await fetchMany(1, 'cl1', 'lb', 1))[0] !== 'FAIL', 10_000),
    'after ovs-vswitchd restarted on node 2, lb answers there',
  );
  t.equal((await fetchMany(1, 'cl1', 'lb', 30)).filter((g) => g === 'FAIL').length, 0, 'and keeps answering');

  // No task: a new connection is refused at once (ICMP port unreachable from ovsnet), not left to
  // time out. Scaled to 0, the service leaves the Engine's list (made of its tasks' entries);
  // ovsnet keeps refusing on its VIP for a while (VANISHED_GRACE_MS) for clients that still have it.
  await mgr.dockerOk(['service', 'scale', '-d', 'lb=0']);
  await view.converge(0, 'lb', 0); // its tasks stopped (QUICK_STOP)
  let refused = { stderr: '', ms: 0 };
  const tried: string[] = [];
  await until(async () => {
    const t0 = Date.now();
    const r = await swarm.host(0).docker(['exec', 'cl0', 'nc', '-w', '2', vipOf('lb'), '80']);
    refused = { stderr: r.stderr.trim(), ms: Date.now() - t0 };
    tried.push(`${refused.stderr || '(connected)'} ${refused.ms} ms`);
    return /refused/i.test(r.stderr);
  }, 8_000);
  t.match(refused.stderr, /refused/i, `lb without tasks: connection refused (tries: ${tried.join(' | ')})`);
  t.ok(refused.ms < 1500, `at once, not after nc's 2 s timeout (${refused.ms} ms with docker exec)`);

  await mgr.dockerOk(['service', 'rm', 'lb']);
  let now: { flows: number; groups: number }[] = [];
  t.ok(
    await until(async () => JSON.stringify((now = await Promise.all([0, 1, 2].map(vipState)))) === JSON.stringify(before), 30_000),
    `docker service rm: every node's VIP flows and groups as before lb (before ${JSON.stringify(before)}, after ${JSON.stringify(now)})`,
  );
  for (const i of [0, 1, 2]) await swarm.host(i).dockerOk(['rm', '-f', `cl${i}`]);
});

t.test(
  "a service publishing a port through Docker's ingress (-p): ovsnet tasks reach it by its VIP; the routing mesh where the kernel has IPVS",
  async (t) => {
    await mgr.dockerOk([
      ...['service', 'create', '-d', '--no-resolve-image', '--name', 'ing', '--network', NET, '--replicas', '2'],
      ...['--publish', 'published=8081,target=80', ...QUICK_STOP, IMAGE, ...HTTPD],
    ]);
    const tasks = await view.converge(0, 'ing', 2);
    await swarm.host(1).dockerOk(['run', '-d', '--name', 'ci1', '--network', NET, IMAGE, 'sleep', '600']);
    t.ok(await until(async () => (await fetchMany(1, 'ci1', 'ing', 1))[0] !== 'FAIL', 15_000), 'ing answers on its ovsnet VIP');
    const got = new Set(await fetchMany(1, 'ci1', 'ing', 30));
    t.ok(tasks.every((x) => got.has(x.container.slice(0, 12))) && !got.has('FAIL'), `from both tasks: ${[...got].join(' ')}`);
    if (fs.existsSync('/proc/net/ip_vs')) {
      for (const i of [0, 1, 2]) {
        const addr = swarm.cluster.addresses[i] ?? '';
        const r = await swarm.host(i).exec(['sh', '-c', `printf 'GET / HTTP/1.0\r\n\r\n' | busybox nc -w 3 ${addr} 8081 | tail -n 1`]);
        t.match(r.stdout.trim(), /^[0-9a-f]{12}$/, `node ${i + 1}:8081 answers through the routing mesh`);
      }
    } else {
      t.comment("this kernel has no IPVS (/proc/net/ip_vs): Docker's ingress routing mesh answers nothing here, whatever the network");
    }
    await swarm.host(1).dockerOk(['rm', '-f', 'ci1']);
    await mgr.dockerOk(['service', 'rm', 'ing']);
  },
);

t.test('a standalone container on any node reaches the tasks', async (t) => {
  const tasks = await view.tasks('web');
  for (const i of [0, 1, 2]) {
    const c = `solo${i}`;
    await swarm.host(i).dockerOk(['run', '-d', '--name', c, '--network', NET, IMAGE, 'sleep', '600']);
    const ip = await swarm.host(i).dockerOk(['inspect', '-f', `{{(index .NetworkSettings.Networks "${NET}").IPAddress}}`, c]);
    t.ok(inSubnet(ip) && !tasks.some((x) => x.ip === ip), `its address ${ip} is the subnet's, no task's`);
    const far = tasks.find((x) => x.host !== i) ?? tasks[0];
    t.ok(far !== undefined && (await pings(swarm, i, c, far.ip)), `node ${i + 1} -> task ${far?.ip ?? ''}`);
    await swarm.host(i).dockerOk(['rm', '-f', c]);
  }
});

t.test('a service port published on the nodes (mode=host) answers from the other nodes', async (t) => {
  await mgr.dockerOk([
    ...['service', 'create', '-d', '--no-resolve-image', '--name', 'pub', '--network', NET],
    ...['--publish', 'mode=host,target=80,published=8080', '--mode', 'global', IMAGE],
    ...['sh', '-c', 'while true; do hostname | nc -l -p 80; done'],
  ]);
  await view.converge(0, 'pub', 3);
  for (const [from, to] of [
    [1, 0],
    [2, 1],
    [0, 2],
  ] as const) {
    const addr = swarm.cluster.addresses[to] ?? '';
    let got = '';
    await until(async () => {
      got = (await swarm.host(from).exec(['busybox', 'nc', '-w', '2', addr, '8080'])).stdout.trim();
      return got !== '';
    }, 10_000);
    t.match(got, /^[0-9a-f]{12}$/, `node ${from + 1} -> ${addr}:8080: the task answers (${got})`);
  }
  await mgr.dockerOk(['service', 'rm', 'pub']);
});

t.test('scaling 0 -> 12 -> 0 leaks no port or tunnel, and no address is given twice', async (t) => {
  await mgr.dockerOk(['service', 'scale', '-d', 'web=0']);
  await view.converge(0, 'web', 0);
  const ports = async () => JSON.stringify(await Promise.all([0, 1, 2].map((i) => view.ports(i))));
  let before = '';
  await until(async () => (before = await ports()) === (await ports()), 10_000);
  await mgr.dockerOk(['service', 'scale', '-d', 'web=12']);
  const tasks = await view.converge(0, 'web', 12, 90_000);
  t.equal(new Set(tasks.map((x) => x.ip)).size, 12, `12 tasks, 12 addresses: ${tasks.map((x) => x.ip).join(' ')}`);
  t.ok(tasks.every((x) => inSubnet(x.ip)));
  const more = await ports();
  t.not(more, before, `12 tasks have ports: ${more}`);
  await mgr.dockerOk(['service', 'scale', '-d', 'web=0']);
  await view.converge(0, 'web', 0);
  // No leak: on every node, ovsnet holds an endpoint port for each endpoint Docker holds and no
  // more, and no tunnel beyond those before the scaling. (Compared with Docker's own count, not
  // with a snapshot taken before: a snapshot read while the earlier steps' containers were still
  // going made this check fail once in CI.)
  const was = JSON.parse(before) as { endpoints: number; tunnels: number }[];
  let after = '';
  const settled = await until(async () => {
    const now = await Promise.all([0, 1, 2].map(async (i) => ({ ...(await view.ports(i)), docker: await view.held(i) })));
    after = JSON.stringify(now);
    return now.every((x, i) => x.endpoints === x.docker && x.tunnels <= (was[i]?.tunnels ?? 0));
  }, 30_000);
  t.ok(settled, `endpoint ports are Docker's endpoints, tunnels as before: before ${before}, after ${after}`);
  await mgr.dockerOk(['service', 'scale', '-d', 'web=6']);
  await view.converge(0, 'web', 6);
});

t.test('a drained node: its tasks run elsewhere, no address twice', async (t) => {
  const node3 = swarm.host(2).name;
  await mgr.dockerOk(['node', 'update', '--availability', 'drain', node3]);
  let tasks = await view.converge(0, 'web', 6, 60_000);
  t.ok(
    await until(async () => (tasks = await view.tasks('web')).every((x) => x.host !== 2) && tasks.length === 6, 60_000),
    'none on node 3',
  );
  t.equal(new Set(tasks.map((x) => x.ip)).size, 6, `no address twice: ${tasks.map((x) => x.ip).join(' ')}`);
  const [a, b] = [tasks.find((x) => x.host === 0), tasks.find((x) => x.host === 1)];
  t.ok(a !== undefined && b !== undefined && (await pings(swarm, a.host, a.container, b.ip)), 'node 1 -> node 2');
  await mgr.dockerOk(['node', 'update', '--availability', 'active', node3]);
});

t.test('three managers, the leader stopped mid-run: a new leader allocates again, tasks and networks as before', async (t) => {
  await mgr.dockerOk(['node', 'promote', swarm.host(1).name, swarm.host(2).name]);
  const second = swarm.host(1);
  const managers = async () => (await second.docker(['node', 'ls', '--format', '{{.Hostname}} {{.Status}} {{.ManagerStatus}}'])).stdout;
  t.ok(await until(async () => (await managers()).match(/Ready (Leader|Reachable)/g)?.length === 3, 30_000), 'three managers');
  const calls = (i: number) => swarm.pluginLog(i).split('NetworkDriver.AllocateNetwork').length - 1;
  const before = [calls(1), calls(2)];
  await swarm.stopDockerd(0);
  let leader = -1;
  t.ok(
    await until(async () => {
      const m = /^(\S+) Ready Leader/m.exec(await managers());
      leader = [1, 2].find((i) => swarm.host(i).name === m?.[1]) ?? -1;
      return leader !== -1;
    }, 60_000),
    'a new leader',
  );
  const newLeader = swarm.host(leader);
  t.ok(await until(async () => calls(leader) > (before[leader - 1] ?? 0), 30_000), `node ${leader + 1} allocated the network again`);
  const live = new SwarmView(swarm, [1, 2]);
  await newLeader.dockerOk(['service', 'scale', '-d', 'web=9']);
  const tasks = await live.converge(leader, 'web', 9, 90_000);
  t.equal(new Set(tasks.map((x) => x.ip)).size, 9, `9 tasks on nodes 2 and 3, 9 addresses: ${tasks.map((x) => x.ip).join(' ')}`);
  await newLeader.dockerOk([
    'network',
    'create',
    '-d',
    'ovsnet:latest',
    '--scope',
    'swarm',
    '--attachable',
    '--subnet',
    '10.93.0.0/24',
    'app2',
  ]);
  await newLeader.dockerOk([
    'service',
    'create',
    '-d',
    '--no-resolve-image',
    '--name',
    'w2',
    '--network',
    'app2',
    '--replicas',
    '2',
    '--replicas-max-per-node',
    '1',
    ...QUICK_STOP,
    IMAGE,
    'sleep',
    '3600',
  ]);
  let w2: Awaited<ReturnType<SwarmView['tasks']>> = [];
  t.ok(await until(async () => (w2 = await live.tasks('w2', 'app2')).length === 2 && w2.every((x) => x.ip !== ''), 60_000));
  const [a, b] = w2;
  t.ok(
    a !== undefined && b !== undefined && a.host !== b.host && (await pings(swarm, a.host, a.container, b.ip)),
    'a new network works across nodes',
  );
  t.equal((await view.keys('tags/vni/')).length, 2, 'with a VNI of its own');
  await newLeader.dockerOk(['service', 'rm', 'w2']);
  t.ok(await until(async () => (await newLeader.docker(['network', 'rm', 'app2'])).code === 0, 30_000));
  await newLeader.dockerOk(['service', 'scale', '-d', 'web=6']);
  await swarm.host(0).restartDockerd();
  t.ok(await until(async () => (await managers()).match(/Ready (Leader|Reachable)/g)?.length === 3, 60_000), 'node 1 back as a manager');
});

t.test('a killed node: its tasks are rescheduled, no address twice among the live ones; its tunnels go', async (t) => {
  // Rebalance onto node 3 (active again) by forcing a redeploy.
  await mgr.dockerOk(['service', 'update', '-d', '--force', 'web']);
  let old: Awaited<ReturnType<SwarmView['tasks']>> = [];
  t.ok(await until(async () => (old = await view.tasks('web')).length === 6 && old.some((x) => x.host === 2), 90_000), 'tasks on node 3');
  await swarm.host(2).down(); // the host is gone at once: dockerd, ovsnet, containers
  const survivors = new SwarmView(swarm, [0, 1]);
  let now: typeof old = [];
  t.ok(
    await until(async () => (now = await survivors.tasks('web')).length === 6 && now.every((x) => x.ip !== ''), 90_000),
    'six tasks again',
  );
  const ips = now.map((x) => x.ip);
  t.equal(new Set(ips).size, 6, `no address twice: ${ips.join(' ')}`);
  // A replacement may be given a dead task's address: the manager's IPAM (Docker's: ovsnet's
  // refuses swarm networks) frees it once it has marked the task down, and its container is gone
  // with its node. (Checking that none was reused failed a CI run: it depends on when the manager
  // frees them, and the tasks seen before the kill may still be rolling from the forced update.)
  const lost = old.filter((x) => x.host === 2).map((x) => x.ip);
  t.comment(
    `the dead node's tasks had ${lost.join(' ')}; reused by replacements: ${ips.filter((ip) => lost.includes(ip)).join(' ') || 'none'}`,
  );
  const [a, b] = [now.find((x) => x.host === 0), now.find((x) => x.host === 1)];
  // A replacement given a dead task's address has its MAC too: node 1 may still send that MAC to
  // node 3 until the replacement's announcement at Join is learned and node 1's Open vSwitch has
  // revalidated its cached flows (cluster.test.ts measures it): within the bound, not at once.
  const t0 = Date.now();
  const talk = a !== undefined && b !== undefined && (await until(() => pings(swarm, a.host, a.container, b.ip), 10_000));
  t.ok(talk, `node 1 -> node 2 (${Date.now() - t0} ms)`);
  t.ok(await until(async () => (await view.ports(0)).tunnels === 1, 10_000), "node 1's tunnels to node 3 are gone");
  // web's VIP: the dead node's tasks leave every live node's group (ovsnet saw node 3's host go),
  // so every ping through the VIP is answered by a live task.
  await swarm.host(0).dockerOk(['run', '-d', '--name', 'vipc', '--network', NET, IMAGE, 'sleep', '600']);
  const loop = 'n=0; for i in $(seq 20); do ping -c 1 -W 1 web >/dev/null && n=$((n+1)); done; echo $n';
  let answered = '';
  t.ok(
    await until(async () => (answered = (await swarm.host(0).dockerOk(['exec', 'vipc', 'sh', '-c', loop])).trim()) === '20', 30_000),
    `20 pings through web's VIP after node 3 died: ${answered} answered`,
  );
  await swarm.host(0).dockerOk(['rm', '-f', 'vipc']);
});

t.test(
  'docker stack deploy with a compose file naming an ovsnet network (internal, its VNI and MTU); stack rm frees its VNI',
  async (t) => {
    const live = new SwarmView(swarm, [0, 1]);
    const file = path.join(swarm.host(0).dir, 'stack.yml');
    fs.writeFileSync(
      file,
      [
        'version: "3.8"',
        'services:',
        '  api:',
        `    image: ${IMAGE}`,
        '    command: sleep 3600',
        '    networks: [front]',
        '    deploy: { replicas: 3, endpoint_mode: dnsrr }',
        'networks:',
        '  front:',
        '    driver: ovsnet:latest',
        '    attachable: true',
        '    internal: true',
        '    driver_opts: { ovsnet.tag: "77", com.docker.network.driver.mtu: "1400" }',
        '    ipam: { config: [{ subnet: 10.92.0.0/24 }] }',
        '',
      ].join('\n'),
    );
    const logical = await view.keys('logical/');
    await mgr.dockerOk(['stack', 'deploy', '--resolve-image', 'never', '-c', file, 'st']);
    let tasks: Awaited<ReturnType<SwarmView['tasks']>> = [];
    t.ok(await until(async () => (tasks = await live.tasks('st_api', 'st_front')).length === 3 && tasks.every((x) => x.ip !== ''), 60_000));
    t.ok(
      tasks.every((x) => /^10\.92\.0\.\d+$/.test(x.ip)),
      `in the compose file's subnet: ${tasks.map((x) => x.ip).join(' ')}`,
    );
    t.equal(new Set(tasks.map((x) => x.ip)).size, 3);
    const a = tasks[0];
    const b = tasks.find((x) => x.host !== a?.host);
    t.ok(a !== undefined && b !== undefined && (await pings(swarm, a.host, a.container, b.ip)), 'tasks on two nodes talk');
    // The names come with swarm's gossip, a moment after the tasks run.
    const want = tasks.map((x) => x.ip).sort();
    let got: string[] = [];
    if (a !== undefined) {
      t.ok(
        await until(async () => (got = await resolve(swarm, a.host, a.container, 'api')).join() === want.join(), 10_000),
        `api -> its tasks: ${got.join(' ')}`,
      );
    }
    t.equal((await view.keys('logical/')).length, logical.length + 1, 'one more VNI');
    t.ok((await view.keys('tags/vni/')).includes('/ovsnet/v1/tags/vni/77'), 'the VNI the compose file asked (ovsnet.tag: 77)');
    if (a !== undefined) {
      const h = swarm.host(a.host);
      const dev = /^\d+:\s+(\S+)/.exec(
        (await h.dockerOk(['exec', a.container, 'ip', '-o', '-4', 'addr', 'show'])).split('\n').find((l) => l.includes(`inet ${a.ip}/`)) ??
          '',
      )?.[1];
      const link = await h.dockerOk(['exec', a.container, 'ip', '-o', 'link', 'show', 'dev', dev ?? 'none']);
      t.match(link, / mtu 1400 /, `the compose file's MTU on the task's interface: ${link}`);
      const routes = await h.dockerOk(['exec', a.container, 'ip', 'route']);
      t.notMatch(routes, /default/, `internal: no default route in the task (${routes.replace(/\n/g, '; ')})`);
    }
    await mgr.dockerOk(['stack', 'rm', 'st']);
    t.ok(await until(async () => (await view.keys('logical/')).length === logical.length, 30_000), "the stack's network and VNI are gone");
  },
);

t.test("docker network rm frees the VNI (the dead node's membership reclaimed)", async (t) => {
  for (const s of ['web', 'db']) await mgr.dockerOk(['service', 'rm', s]);
  const id = await mgr.dockerOk(['network', 'inspect', '-f', '{{.Id}}', NET]);
  // Docker refuses while the network's tasks are still leaving.
  t.ok(await until(async () => (await mgr.docker(['network', 'rm', NET])).code === 0, 30_000), 'docker network rm');
  t.ok(
    // The dead node's own records stay, as any dead host's (its ovsnet removes them if it comes back).
    await until(async () => (await view.keys('')).every((k) => !k.includes(id) || k.includes(`${id}.n3`)), 30_000),
    `no key of swarm network ${id} is left (logical record, VNI, the live nodes' records)`,
  );
  t.same(await view.keys('tags/vni/'), [], 'no VNI held');
  t.same(
    [await view.ports(0), await view.ports(1)],
    [
      { endpoints: 0, tunnels: 0 },
      { endpoints: 0, tunnels: 0 },
    ],
    'no port, no tunnel',
  );
});
