/**
 * Everyday Docker features on ovsnet networks, with real Docker: the embedded
 * DNS, a docker-compose 1.29 project, multicast, isolation from Docker's bridge networks both
 * ways, the masquerade carrying traffic out, dual-stack networks, and dockerd restarted with
 * --live-restore under running containers. One host for all (dockerd runs with --live-restore
 * throughout: nothing else here depends on it).
 *
 * "Outside" is a namespace this test makes, joined to the host by a veth: the host routes
 * 198.19.0.0/24 to it and it has no route back to container subnets, so only traffic
 * masqueraded to the host's 198.18.0.1 gets an answer. There a server answers each TCP
 * connection with the source address it saw, and a DNS server answers every query "no such
 * name": containers that look up a name Docker does not know get `--dns 198.18.0.2`, so no
 * query is forwarded to the machine's own resolver.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { DockerHost, IMAGE, MAIN, run, type Run } from '../harness/host.js';

const FAR = '198.19.0.10';
const NO_DNS = ['--dns', '198.18.0.2'];
/** The outside's servers: who-are-you on FAR:9000, and "no such name" (RCODE 3) to every DNS query on 198.18.0.2:53. */
const OUTSIDE_SERVERS = `require('net').createServer((s) => s.end('seen ' + s.remoteAddress + '\\n')).listen(9000, '${FAR}');
const d = require('dgram').createSocket('udp4');
d.on('message', (m, r) => { const a = Buffer.from(m); a[2] = 0x81; a[3] = 0x83; d.send(a, r.port, r.address); });
d.bind(53, '198.18.0.2');`;
const outsidePids: string[] = [];
const host = await DockerHost.up('every', { dockerdArgs: '--live-restore' });
const outside = `${host.name}-o`;
const ovsnet = await host.startOvsnet();
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-everyday-'));
t.teardown(async () => {
  for (const pid of outsidePids) await run('kill', [pid]);
  await run('docker-compose', ['-p', 'evc', '-f', path.join(tmp, 'docker-compose.yml'), 'down'], { env: composeEnv(), timeoutMs: 60_000 });
  await host.down();
  await ovsnet.kill('SIGTERM');
  await run('ip', ['netns', 'del', outside]);
  fs.rmSync(tmp, { recursive: true, force: true });
});

function composeEnv(): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH ?? '', DOCKER_HOST: `unix://${host.dir}/run/docker.sock`, HOME: tmp };
}

async function ok(r: Promise<Run>, what: string): Promise<string> {
  const res = await r;
  if (res.code !== 0) throw new Error(`${what} failed (${res.code}): ${res.stderr}${res.stdout}`);
  return res.stdout.trim();
}
const ip = (args: string[]) => ok(run('ip', args), `ip ${args.join(' ')}`);
const sh = (args: string[]) => ok(host.exec(args), args.join(' '));
const inOutside = (args: string[], timeoutMs = 20_000) => run('ip', ['netns', 'exec', outside, ...args], { timeoutMs });
const addrOf = (c: string, net: string, field = 'IPAddress') =>
  host.dockerOk(['inspect', '-f', `{{(index .NetworkSettings.Networks "${net}").${field}}}`, c]);
const pidOf = (c: string) => host.dockerOk(['inspect', '-f', '{{.State.Pid}}', c]);
/** node running `script` in a container's network namespace (busybox has no multicast tools). */
const nodeIn = async (c: string, script: string, timeoutMs = 20_000) =>
  run('nsenter', ['-t', await pidOf(c), '-n', process.execPath, '-e', script], { timeoutMs });
/** What a container gets from IP:PORT over TCP ('' when nothing answers within 2 s). */
const tcp = async (c: string, address: string, port: number) =>
  (await host.docker(['exec', c, 'sh', '-c', `busybox nc -w 2 ${address} ${port} </dev/null`])).stdout.trim();
const server = (name: string, port = 7000) => ['sh', '-c', `while true; do echo ${name} | nc -l -p ${port}; done`];
const ports = async () => (await sh(['ovs-vsctl', 'list-ports', 'ovsnet0'])).split('\n').filter((p) => p !== '');

await t.test('setup: the outside namespace, routed through the host', async () => {
  await ip(['netns', 'add', outside]);
  await ip(['link', 'add', 'ox0', 'netns', host.name, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', outside]);
  await ip(['-n', host.name, 'addr', 'add', '198.18.0.1/24', 'dev', 'ox0']);
  await ip(['-n', host.name, 'link', 'set', 'ox0', 'up']);
  await ip(['-n', outside, 'link', 'set', 'lo', 'up']);
  await ip(['-n', outside, 'addr', 'add', `${FAR}/32`, 'dev', 'lo']);
  await ip(['-n', outside, 'addr', 'add', '198.18.0.2/24', 'dev', 'eth0']);
  await ip(['-n', outside, 'link', 'set', 'eth0', 'up']);
  await ip(['-n', host.name, 'route', 'add', '198.19.0.0/24', 'via', '198.18.0.2']);
  fs.writeFileSync(path.join(tmp, 'outside.js'), OUTSIDE_SERVERS);
  const started = await inOutside(['sh', '-c', `${process.execPath} ${path.join(tmp, 'outside.js')} >/dev/null 2>&1 & echo $!`]);
  outsidePids.push(started.stdout.trim());
});

await t.test("Docker's embedded DNS: container names and --network-alias aliases resolve, only within the network", async (t) => {
  await host.dockerOk(['network', 'create', '-d', 'ovsnet', '--ipam-driver', 'ovsnet', '--subnet', '10.81.1.0/24', 'dns']);
  await host.dockerOk(['network', 'create', '-d', 'ovsnet', '--subnet', '10.81.2.0/24', 'dns2']);
  await host.dockerOk([
    'run',
    '-d',
    '--name',
    'named',
    '--network',
    'dns',
    '--network-alias',
    'web',
    '--network-alias',
    'api',
    IMAGE,
    ...server('named'),
  ]);
  await host.dockerOk(['run', '-d', '--name', 'asker', '--network', 'dns', ...NO_DNS, IMAGE, 'sleep', '600']);
  await host.dockerOk(['run', '-d', '--name', 'stranger', '--network', 'dns2', ...NO_DNS, IMAGE, 'sleep', '600']);
  const named = await addrOf('named', 'dns');
  t.equal(
    await host.dockerOk(['exec', 'asker', 'cat', '/etc/resolv.conf']).then((r) => /nameserver 127\.0\.0\.11/.test(r)),
    true,
    "Docker's resolver",
  );
  for (const name of ['named', 'web', 'api']) {
    const r = await host.docker(['exec', 'asker', 'busybox', 'nslookup', name]);
    t.match(r.stdout, new RegExp(`Name:\\s+${name}\\s+Address:\\s+${named.replace(/\./g, '\\.')}`), `${name} resolves to ${named}`);
    t.equal(await tcp('asker', name, 7000), 'named', `and carries traffic by the name ${name}`);
  }
  const absent = await host.docker(['exec', 'asker', 'busybox', 'nslookup', 'nosuchname']);
  t.match(absent.stdout, /NXDOMAIN/, 'a name no container has is asked of the external server (--dns), which knows none');
  const across = await host.docker(['exec', 'stranger', 'busybox', 'nslookup', 'web']);
  t.match(across.stdout, /NXDOMAIN/, "another network's container does not resolve the alias: Docker forwards the query");
  t.notMatch(across.stdout, named);
});

const COMPOSE = `version: "2.4"
services:
  api:
    image: ${IMAGE}
    command: ["sh", "-c", "while true; do hostname | nc -l -p 8080; done"]
    networks:
      front:
        ipv4_address: 10.82.1.50
      back: {}
  worker:
    image: ${IMAGE}
    command: ["sleep", "600"]
    networks: [front, back]
networks:
  front:
    driver: ovsnet
    driver_opts:
      ovsnet.tag: "310"
    ipam:
      driver: ovsnet
      config:
        - subnet: 10.82.1.0/24
          ip_range: 10.82.1.128/25
          gateway: 10.82.1.1
  back:
    driver: ovsnet
    driver_opts:
      com.docker.network.driver.mtu: "1400"
    ipam:
      config:
        - subnet: 10.82.2.0/24
          ip_range: 10.82.2.64/26
`;

await t.test('docker-compose 1.29: two ovsnet networks, driver_opts, ipam.config (ip_range, ipv4_address), --scale', async (t) => {
  const file = path.join(tmp, 'docker-compose.yml');
  fs.writeFileSync(file, COMPOSE);
  const compose = (args: string[]) =>
    ok(
      run('docker-compose', ['-p', 'evc', '-f', file, ...args], { env: composeEnv(), timeoutMs: 120_000 }),
      `docker-compose ${args.join(' ')}`,
    );
  await compose(['up', '-d', '--scale', 'worker=3']);
  const workers = ['evc_worker_1', 'evc_worker_2', 'evc_worker_3'];
  t.equal(await addrOf('evc_api_1', 'evc_front'), '10.82.1.50', 'ipv4_address (ovsnet IPAM)');
  const inRange = (a: string, prefix: string, lo: number, hi: number) =>
    a.startsWith(prefix) && Number(a.split('.')[3]) >= lo && Number(a.split('.')[3]) <= hi;
  for (const w of workers) {
    const front = await addrOf(w, 'evc_front');
    const back = await addrOf(w, 'evc_back');
    t.ok(inRange(front, '10.82.1.', 128, 255), `${w} front ${front} within ip_range 10.82.1.128/25 (ovsnet IPAM)`);
    t.ok(inRange(back, '10.82.2.', 64, 127), `${w} back ${back} within ip_range 10.82.2.64/26 (Docker's IPAM)`);
  }
  const frontId = (await host.dockerOk(['network', 'inspect', '-f', '{{.Id}}', 'evc_front'])).slice(0, 12);
  const tagged = (await sh(['ovs-vsctl', '--bare', '--columns=name', 'find', 'port', 'tag=310'])).split(/\s+/).filter((p) => p !== '');
  t.equal(tagged.length, 5, 'driver_opts ovsnet.tag=310: the gateway and the four containers of front on VLAN 310');
  t.ok(tagged.includes(`ovg${frontId}`));
  /** The MTU of the worker's interface on a subnet (interfaces are numbered in the order Docker attached them). */
  const mtuOn = async (subnet: string) => {
    const line = (await host.dockerOk(['exec', 'evc_worker_1', 'ip', '-o', '-4', 'addr', 'show']))
      .split('\n')
      .find((l) => l.includes(subnet));
    const dev = line?.split(/\s+/)[1] ?? 'none';
    return host.dockerOk(['exec', 'evc_worker_1', 'cat', `/sys/class/net/${dev}/mtu`]);
  };
  t.equal(await mtuOn(' 10.82.2.'), '1400', 'driver_opts com.docker.network.driver.mtu=1400 on back');
  t.equal(await mtuOn(' 10.82.1.'), '1500', 'the default on front');
  const apiName = await host.dockerOk(['exec', 'evc_api_1', 'hostname']);
  for (const w of workers) t.equal(await tcp(w, 'api', 8080), apiName, `${w} reaches api by its service name`);
  t.equal(await tcp('evc_worker_3', '10.82.1.50', 8080), apiName, 'and at its ipv4_address');
  const lookup = await host.dockerOk(['exec', 'evc_api_1', 'busybox', 'nslookup', 'worker']);
  t.equal(lookup.match(/Address: 10\.82\./g)?.length, 3, 'the service name resolves to its three replicas');
  const before = (await ports()).length;
  await compose(['up', '-d', '--scale', 'worker=1']);
  t.equal((await ports()).length, before - 4, 'scaled down to one worker: two replicas x two networks of ports gone');
  await compose(['down']);
  t.equal((await host.docker(['network', 'inspect', 'evc_front'])).code, 1, 'down removes the networks');
  t.same(
    (await ports()).filter((p) => p.includes(frontId)),
    [],
    'and their ports',
  );
});

/** Receives on 239.7.7.7:5007 for 6 s, then prints what came. */
const RECEIVER = `const d = require('dgram').createSocket({ type: 'udp4', reuseAddr: true });
const got = [];
d.on('message', (m, r) => { got.push(m + ' from ' + r.address); });
d.bind(5007, () => d.addMembership('239.7.7.7'));
setTimeout(() => { console.log(got.join('\\n')); process.exit(0); }, 6000);`;
const SENDER = `const d = require('dgram').createSocket('udp4');
let n = 0;
d.bind(() => { d.setMulticastTTL(1); const t = setInterval(() => { d.send('hello' + n++, 5007, '239.7.7.7'); if (n === 16) { clearInterval(t); d.close(); } }, 250); });`;

await t.test('multicast: a group sender reaches the two other members of its network, no one on another network', async (t) => {
  await host.dockerOk(['network', 'create', '-d', 'ovsnet', '--subnet', '10.83.1.0/24', 'mc']);
  for (const c of ['mc1', 'mc2', 'mc3']) await host.dockerOk(['run', '-d', '--name', c, '--network', 'mc', IMAGE, 'sleep', '600']);
  await host.dockerOk(['run', '-d', '--name', 'mcx', '--network', 'dns2', IMAGE, 'sleep', '600']);
  const sender = await addrOf('mc1', 'mc');
  const receivers = ['mc2', 'mc3', 'mcx'].map((c) => nodeIn(c, RECEIVER));
  await new Promise((r) => setTimeout(r, 1000)); // the receivers joined the group (the sender sends for 4 s)
  await nodeIn('mc1', SENDER);
  const [mc2, mc3, mcx] = await Promise.all(receivers);
  t.match(mc2?.stdout, new RegExp(`hello\\d+ from ${sender}`), 'mc2 receives the group traffic');
  t.match(mc3?.stdout, new RegExp(`hello\\d+ from ${sender}`), 'mc3 receives the group traffic');
  t.equal(mcx?.stdout.trim(), '', 'a member of the same group on another ovsnet network receives nothing');
});

await t.test("isolation from Docker's bridge networks, both ways; published ports still reachable", async (t) => {
  await host.dockerOk([
    'run',
    '-d',
    '--name',
    'br1',
    '--network',
    'bridge',
    '-p',
    '18081:7001',
    IMAGE,
    'sh',
    '-c',
    `${server('br1')[2] ?? ''} & ${server('br1-published', 7001)[2] ?? ''}`,
  ]);
  await host.dockerOk(['run', '-d', '--name', 'ov1', '--network', 'dns', IMAGE, ...server('ov1')]);
  const br1 = await host.dockerOk(['inspect', '-f', '{{.NetworkSettings.IPAddress}}', 'br1']);
  const ov1 = await addrOf('ov1', 'dns');
  t.equal(await sh(['sh', '-c', `busybox nc -w 2 ${br1} 7000 </dev/null`]), 'br1', 'control: the host reaches the bridge container');
  t.equal(await tcp('asker', ov1, 7000), 'ov1', "control: ov1's own network reaches it");
  t.equal(await tcp('asker', br1, 7000), '', 'an ovsnet container cannot open a connection to a bridge container');
  t.not((await host.docker(['exec', 'asker', 'ping', '-c', '1', '-W', '2', br1])).code, 0, 'nor ping it');
  t.equal(await tcp('br1', ov1, 7000), '', 'a bridge container cannot open a connection to an ovsnet container');
  t.not((await host.docker(['exec', 'br1', 'ping', '-c', '1', '-W', '2', ov1])).code, 0, 'nor ping it');
  t.equal(await tcp('asker', '10.81.1.1', 18081), 'br1-published', "the bridge container's published port answers on the host's address");
});

await t.test("the masquerade carries a container's traffic out, with the host's address as its source", async (t) => {
  let seen = '';
  for (let i = 0; i < 25 && seen === ''; i++) {
    seen = await tcp('asker', FAR, 9000);
    if (seen === '') await new Promise((r) => setTimeout(r, 200));
  }
  t.equal(seen, 'seen 198.18.0.1', "outside sees the host's address, not the container's");
  t.not(
    (await inOutside(['ping', '-c', '1', '-W', '1', await addrOf('asker', 'dns')])).code,
    0,
    'control: outside has no route to the container itself',
  );
});

await t.test('a user-defined Docker bridge network made after the ovsnet one: no connection in, nor after dockerd restarts', async (t) => {
  // As a user would: both networks exist (Docker put its bridge's accept rules in FORWARD last).
  await host.dockerOk(['network', 'create', '--subnet', '10.86.1.0/24', 'ubr']);
  await host.dockerOk(['run', '-d', '--name', 'ub1', '--network', 'ubr', IMAGE, ...server('ub1')]);
  const ov1 = await addrOf('ov1', 'dns');
  const ub1 = await addrOf('ub1', 'ubr');
  const isolated = async (when: string) => {
    t.equal(await sh(['sh', '-c', `busybox nc -w 2 ${ub1} 7000 </dev/null`]), 'ub1', `${when}: control: the host reaches ub1`);
    t.equal(await tcp('asker', ov1, 7000), 'ov1', `${when}: control: ov1 answers on its own network`);
    t.equal(await tcp('ub1', ov1, 7000), '', `${when}: ub1 cannot open a connection to ov1's unpublished port`);
    t.not((await host.docker(['exec', 'ub1', 'ping', '-c', '1', '-W', '2', ov1])).code, 0, `${when}: nor ping it`);
    t.equal(await tcp('asker', ub1, 7000), '', `${when}: nor the other way`);
    t.equal(await tcp('asker', FAR, 9000), 'seen 198.18.0.1', `${when}: ovsnet's container still reaches outside`);
  };
  await isolated('both networks made');
  await host.restartDockerd('--live-restore');
  await isolated('dockerd restarted');
  await host.dockerOk(['rm', '-f', 'ub1']);
  await host.dockerOk(['network', 'rm', 'ubr']);
});

await t.test('dual stack on a host whose new interfaces get IPv6 off: IPv6 ping across containers and to the gateway', async (t) => {
  for (const [net, prefix, ipam] of [
    ['six', 'fd00:84:1::', []],
    ['six2', 'fd00:84:2::', ['--ipam-driver', 'ovsnet']],
  ] as const) {
    // A common hardening (the simulated host's own default is 0): the gateway port is created with IPv6 off.
    await sh(['sysctl', '-qw', 'net.ipv6.conf.default.disable_ipv6=1']);
    const v4 = prefix.replace(/^fd00:84:(\d)::$/, '10.84.$1.0/24');
    await host.dockerOk(['network', 'create', '-d', 'ovsnet', ...ipam, '--ipv6', '--subnet', v4, '--subnet', `${prefix}/64`, net]);
    await sh(['sysctl', '-qw', 'net.ipv6.conf.default.disable_ipv6=0']);
    // Right after the network: its gateway answers the first packet (no duplicate address detection pending).
    const first = await host.docker(['run', '--rm', '--network', net, IMAGE, 'ping', '-6', '-c', '1', '-W', '1', `${prefix}1`]);
    t.match(first.stdout, /1 packets received/, `${net}: a new container's first IPv6 ping to the gateway ${prefix}1 answered`);
    await host.dockerOk(['run', '-d', '--name', `${net}a`, '--network', net, IMAGE, 'sleep', '600']);
    await host.dockerOk(['run', '-d', '--name', `${net}b`, '--network', net, IMAGE, 'sleep', '600']);
    const b = await addrOf(`${net}b`, net, 'GlobalIPv6Address');
    t.ok(b.startsWith(prefix), `${net}: ${b} from ${prefix}/64`);
    const across = await host.docker(['exec', `${net}a`, 'ping', '-6', '-c', '2', '-W', '2', b]);
    t.match(across.stdout, /2 packets received/, `${net}: IPv6 ping across containers`);
    const gw = await host.docker(['exec', `${net}a`, 'ping', '-6', '-c', '2', '-W', '2', `${prefix}1`]);
    t.match(gw.stdout, /2 packets received/, `${net}: IPv6 ping to the gateway`);
    const v4ping = await host.docker(['exec', `${net}a`, 'ping', '-c', '1', '-W', '2', await addrOf(`${net}b`, net)]);
    t.equal(v4ping.code, 0, `${net}: and IPv4 across the same containers`);
  }
});

await t.test('dockerd restarted with --live-restore: traffic flows through it, endpoints usable and removable after', async (t) => {
  await host.dockerOk(['network', 'create', '-d', 'ovsnet', '--subnet', '10.85.1.0/24', 'live']);
  await host.dockerOk(['run', '-d', '--name', 'lr1', '--network', 'live', IMAGE, ...server('lr1')]);
  const lr1 = await addrOf('lr1', 'live');
  const started = await host.dockerOk(['inspect', '-f', '{{.State.StartedAt}}', 'lr1']);
  // 40 pings every 0.25 s: 10 s, around the restart (about 2-5 s).
  await host.dockerOk([
    'run',
    '-d',
    '--name',
    'lr2',
    '--network',
    'live',
    IMAGE,
    'sh',
    '-c',
    `ping -c 40 -i 0.25 -W 1 ${lr1} >/tmp/ping.log 2>&1; echo done >>/tmp/ping.log; sleep 600`,
  ]);
  const endpointsBefore = await ports();
  await host.restartDockerd('--live-restore');
  let log = '';
  for (let i = 0; i < 60 && !log.includes('done'); i++) {
    await new Promise((r) => setTimeout(r, 500));
    log = (await host.docker(['exec', 'lr2', 'cat', '/tmp/ping.log'])).stdout;
  }
  t.match(log, /40 packets transmitted, 40 packets received/, 'no ping lost while dockerd restarted');
  t.equal(
    await host.dockerOk(['inspect', '-f', '{{.State.Running}} {{.State.StartedAt}}', 'lr1']),
    `true ${started}`,
    'the container kept running (not restarted)',
  );
  t.same(await ports(), endpointsBefore, 'the same ports on the bridge');
  t.equal(await tcp('lr2', 'lr1', 7000), 'lr1', 'after: the endpoints carry traffic, by name (the DNS restored too)');
  await host.dockerOk(['run', '-d', '--name', 'lr3', '--network', 'live', IMAGE, 'sleep', '600']);
  t.equal(await tcp('lr3', lr1, 7000), 'lr1', 'a new container joins and reaches a restored one');
  t.equal(
    await tcp('asker', await host.dockerOk(['inspect', '-f', '{{.NetworkSettings.IPAddress}}', 'br1']), 7000),
    '',
    'still isolated from the bridge network (Docker re-made its chains)',
  );
  const lr1Port = `ovh${(await host.dockerOk(['inspect', '-f', '{{(index .NetworkSettings.Networks "live").EndpointID}}', 'lr1'])).slice(0, 12)}`;
  t.ok((await ports()).includes(lr1Port));
  await host.dockerOk(['rm', '-f', 'lr1', 'lr2', 'lr3']);
  t.notOk((await ports()).includes(lr1Port), "a restored container's endpoint is removed with it");
  await host.dockerOk(['network', 'rm', 'live']);
});

await t.test(
  'enable_icc=false: containers of the network reach no other container of it, each reaches the gateway, the outside and its published port',
  async (t) => {
    const icc = ['-o', 'com.docker.network.bridge.enable_icc=false'];
    await host.dockerOk([
      'network',
      'create',
      '-d',
      'ovsnet',
      '--ipv6',
      '--subnet',
      '10.87.1.0/24',
      '--subnet',
      'fd00:87:1::/64',
      ...icc,
      'noicc',
    ]);
    t.equal(
      await host.dockerOk(['network', 'inspect', '-f', '{{index .Options "com.docker.network.bridge.enable_icc"}}', 'noicc']),
      'false',
      'docker network inspect shows the option, as for a bridge network',
    );
    await host.dockerOk(['run', '-d', '--name', 'ic1', '--network', 'noicc', '-p', '18087:7000', IMAGE, ...server('ic1')]);
    await host.dockerOk(['run', '-d', '--name', 'ic2', '--network', 'noicc', IMAGE, ...server('ic2')]);
    const [ic1, ic2] = [await addrOf('ic1', 'noicc'), await addrOf('ic2', 'noicc')];
    const ic2v6 = await addrOf('ic2', 'noicc', 'GlobalIPv6Address');
    const ping = async (c: string, to: string, six = false) =>
      (await host.docker(['exec', c, 'ping', ...(six ? ['-6'] : []), '-c', '1', '-W', '2', to])).code === 0;
    t.ok(await ping('ic1', '10.87.1.1'), 'ic1 -> the gateway');
    t.ok(await ping('ic2', 'fd00:87:1::1', true), 'ic2 -> the gateway over IPv6');
    t.equal(await tcp('ic1', FAR, 9000), 'seen 198.18.0.1', 'ic1 -> the outside, masqueraded');
    t.equal(await sh(['sh', '-c', 'busybox nc -w 2 10.81.1.1 18087 </dev/null']), 'ic1', "the host reaches ic1's published port");
    t.equal((await inOutside(['busybox', 'nc', '-w', '2', '198.18.0.1', '18087'])).stdout.trim(), 'ic1', 'and so does the outside');
    t.notOk(await ping('ic1', ic2), 'ic1 -> ic2: no ping');
    t.notOk(await ping('ic2', ic1), 'ic2 -> ic1: no ping');
    t.notOk(await ping('ic1', ic2v6, true), 'ic1 -> ic2: no ping over IPv6');
    t.equal(await tcp('ic1', ic2, 7000), '', 'ic1 -> ic2: no TCP');
    t.equal(await tcp('ic2', ic1, 7000), '', 'ic2 -> ic1: no TCP to its unpublished port');
    const arping = await host.docker(['exec', 'ic1', 'busybox', 'arping', '-c', '2', '-w', '3', '-I', 'eth0', ic2]);
    t.not(arping.code, 0, `ic1's ARP for ic2 gets no answer: ${arping.stdout.trim()}`);
    t.equal(
      (await host.docker(['exec', 'ic1', 'busybox', 'arping', '-c', '1', '-w', '3', '-I', 'eth0', '10.87.1.1'])).code,
      0,
      'its ARP for the gateway does',
    );
    // ovsnet trace gives the datapath's verdict with the option that made it.
    const trace = async (dest: string) => {
      const r = await host.exec([
        'env',
        'OVSNET_STORE=sqlite:/run/ovsnet/state.db',
        process.execPath,
        MAIN,
        'trace',
        'ic1',
        dest,
        '-o',
        'json',
      ]);
      return r.code === 0 ? (JSON.parse(r.stdout) as { verdict: string }).verdict : r.stderr;
    };
    t.match(
      await trace(`${ic2}:7000/tcp`),
      /^dropped: enable_icc=false on network noicc/,
      'ovsnet trace: ic1 -> ic2 dropped, by enable_icc=false',
    );
    t.notMatch(await trace(`${FAR}:9000/tcp`), /^dropped/, 'and ic1 -> the outside is not');
    await host.dockerOk(['rm', '-f', 'ic1', 'ic2']);
    await host.dockerOk(['network', 'rm', 'noicc']);
    const left = await sh(['ovs-ofctl', '-O', 'OpenFlow13', 'dump-flows', 'ovsnet0', 'cookie=0x0f62000000000000/0xffff000000000000']);
    t.notMatch(left, /priority=/, 'no enable_icc=false flow left with the network');
  },
);

await t.test('everything removed', async (t) => {
  const all = (await host.dockerOk(['ps', '-aq'])).split('\n').filter((x) => x !== '');
  if (all.length > 0) await host.dockerOk(['rm', '-f', ...all]);
  await host.dockerOk(['network', 'rm', 'dns', 'dns2', 'mc', 'six', 'six2']);
  t.same(await ports(), [], 'no port on the bridge');
});
