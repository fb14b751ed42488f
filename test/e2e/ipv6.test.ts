/**
 * IPv6 as IPv4 is, with real Docker (issue 26): dual-stack ovsnet networks isolated over IPv6
 * from each other and from a Docker bridge network with --ipv6, tried by traffic (new TCP
 * connections and ICMPv6 echo); ports published on IPv6 host addresses, reached from the host
 * and from an "outside" namespace routed through it (fd00:99::2, the host fd00:99::1), never
 * shadowing a host service on [::1]; NAT66 out by default (the outside sees the host's address),
 * none with enable_ip_masquerade=false. One host for all.
 */
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { DockerHost, IMAGE, run } from '../harness/host.js';

const host = await DockerHost.up('six', { dockerdArgs: '--experimental --ip6tables' });
const ovsnet = await host.startOvsnet();
const out = `ov6-${randomBytes(3).toString('hex')}`;
const outPids: string[] = [];
t.teardown(async () => {
  for (const pid of outPids) await run('kill', [pid]);
  await run('ip', ['netns', 'del', out]);
  await host.down();
  await ovsnet.kill('SIGTERM');
});

const v6Of = (c: string, net: string) =>
  host.dockerOk(['inspect', '-f', `{{(index .NetworkSettings.Networks "${net}").GlobalIPv6Address}}`, c]);
/** busybox nc answering every TCP connection on [::]:7000 with the container's name. */
const server = (name: string) => ['sh', '-c', `while true; do echo ${name} | nc -l -p 7000; done`];
/** What a container gets from [ADDR]:PORT over TCP ('' when nothing answers within 2 s), tried a few times. */
const tcp6 = async (c: string, address: string, port = 7000, tries = 1) => {
  for (let i = 0; i < tries; i++) {
    const r = await host.docker(['exec', c, 'sh', '-c', `busybox nc -w 2 ${address} ${port} </dev/null`]);
    if (r.stdout.trim() !== '') return r.stdout.trim();
    if (i < tries - 1) await new Promise((r) => setTimeout(r, 200));
  }
  return '';
};
const ping6 = async (c: string, address: string) =>
  (await host.docker(['exec', c, 'ping', '-6', '-c', '1', '-W', '2', address])).code === 0;
const dual = (v4: string, v6: string, name: string, driver = ['-d', 'ovsnet']) =>
  host.dockerOk(['network', 'create', ...driver, '--ipv6', '--subnet', v4, '--subnet', v6, name]);
const addr: Record<string, string> = {};

await t.test('setup: two dual-stack ovsnet networks and a Docker bridge network with --ipv6, a server on each', async () => {
  await dual('10.93.1.0/24', 'fd00:93:1::/64', 'sa');
  await dual('10.93.2.0/24', 'fd00:93:2::/64', 'sb');
  await dual('10.93.3.0/24', 'fd00:93:3::/64', 'br6', []);
  for (const [c, net] of [
    ['a1', 'sa'],
    ['a2', 'sa'],
    ['b1', 'sb'],
    ['r1', 'br6'],
  ] as const) {
    await host.dockerOk(['run', '-d', '--name', c, '--network', net, IMAGE, ...server(c)]);
    addr[c] = await v6Of(c, net);
  }
});

await t.test('IPv6 within a network works; across networks and to and from a Docker bridge it is dropped', async (t) => {
  const a2 = addr.a2 ?? '';
  t.equal(await tcp6('a1', a2, 7000, 25), 'a2', 'control: TCP over IPv6 within a network');
  t.ok(await ping6('a1', a2), 'control: ICMPv6 echo within a network');
  t.equal(await tcp6('b1', a2), '', 'another ovsnet network cannot open a TCP connection over IPv6');
  t.notOk(await ping6('b1', a2), 'nor ping over IPv6');
  t.equal(await tcp6('a1', addr.b1 ?? ''), '', 'nor the other way');
  t.notOk(await ping6('a1', addr.b1 ?? ''), 'nor ping the other way');
  t.equal(await tcp6('r1', a2), '', 'a Docker bridge container cannot open a TCP connection over IPv6');
  t.notOk(await ping6('r1', a2), 'nor ping over IPv6');
  t.equal(await tcp6('a1', addr.r1 ?? ''), '', 'an ovsnet container cannot open one to a Docker bridge container');
  t.notOk(await ping6('a1', addr.r1 ?? ''), 'nor ping it');
});

const inOut = (args: string[]) => run('ip', ['netns', 'exec', out, ...args], { timeoutMs: 20_000 });
/** What `from` gets from [ADDR]:PORT over TCP, tried for up to ~10 s ('' when nothing answers). */
const get = async (from: (args: string[]) => Promise<{ stdout: string }>, address: string, port: number, tries = 50) => {
  for (let i = 0; i < tries; i++) {
    const text = (await from(['sh', '-c', `busybox nc -w 2 ${address} ${port} </dev/null`])).stdout.trim();
    if (text !== '') return text;
    if (i < tries - 1) await new Promise((r) => setTimeout(r, 200));
  }
  return '';
};
const fromHost = (args: string[]) => host.exec(args);

await t.test(
  '-p [::]:PORT and -p [::1]:PORT: reached over IPv6 from the host and from outside; a host service on [::1] never shadowed',
  async (t) => {
    await run('ip', ['netns', 'add', out]);
    await run('ip', ['link', 'add', 'vout6', 'netns', host.name, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', out]);
    await host.exec(['ip', 'addr', 'add', 'fd00:99::1/64', 'dev', 'vout6', 'nodad']);
    await host.exec(['ip', 'link', 'set', 'vout6', 'up']);
    await inOut(['ip', 'addr', 'add', 'fd00:99::2/64', 'dev', 'eth0', 'nodad']);
    await inOut(['ip', 'link', 'set', 'eth0', 'up']);
    await inOut(['ip', 'link', 'set', 'lo', 'up']);
    await inOut(['ip', '-6', 'route', 'add', 'default', 'via', 'fd00:99::1']);

    await host.dockerOk([
      'run',
      '-d',
      '--name',
      'web6',
      '--network',
      'sa',
      '-p',
      '[::]:18080:7000',
      '-p',
      '[::1]:18081:7000',
      IMAGE,
      ...server('web6'),
    ]);
    t.equal(await get(fromHost, '::1', 18081), 'web6', '[::1]:18081 from the host (relayed)');
    t.equal(await get(fromHost, '::1', 18080), 'web6', '[::1]:18080 from the host ([::] holds every IPv6 address)');
    t.equal(await get(fromHost, 'fd00:99::1', 18080), 'web6', "the host's own IPv6 address (DNAT)");
    t.equal(await get(inOut, 'fd00:99::1', 18080), 'web6', 'from outside, routed to the host (DNAT)');
    t.equal(await get(inOut, 'fd00:99::1', 18081, 3), '', '[::1]:18081 only on loopback');
    t.equal(
      await get(inOut, addr.a2 ?? '', 7000, 3),
      '',
      'outside cannot open a connection to an unpublished port of a container (inbound drop)',
    );
    t.equal(await get(fromHost, '127.0.0.1', 18080, 3), '', 'IPv4 is not published by an IPv6 host address');

    await host.exec([
      'sh',
      '-c',
      `${process.execPath} -e 'require("net").createServer((s) => s.on("error", () => {}).end("host-on-v6-loopback")).listen(18082, "::1")' >/dev/null 2>&1 &`,
    ]);
    t.equal(await get(fromHost, '::1', 18082), 'host-on-v6-loopback', 'control: a host service on [::1]:18082');
    const taken = await host.docker([
      'run',
      '-d',
      '--name',
      'shadow',
      '--network',
      'sa',
      '-p',
      '[::1]:18082:7000',
      IMAGE,
      ...server('shadow'),
    ]);
    t.not(taken.code, 0, 'publishing it is refused');
    t.match(taken.stderr, /host tcp port 18082 on ::1 is in use by a process of this host: publish another port/);
    const wide = await host.docker([
      'run',
      '-d',
      '--name',
      'shadow2',
      '--network',
      'sa',
      '-p',
      '[::]:18082:7000',
      IMAGE,
      ...server('shadow2'),
    ]);
    t.match(wide.stderr, /host tcp port 18082 on :: is in use by a process of this host/, 'and on [::]');
    t.equal(await get(fromHost, '::1', 18082), 'host-on-v6-loopback', 'the host service still answers');
    await host.docker(['rm', '-f', 'shadow', 'shadow2']);
  },
);

await t.test("NAT66: a container's IPv6 out carries the host's address; enable_ip_masquerade=false keeps its own", async (t) => {
  // The outside: a server answering each connection with the source it saw; no route back to
  // container subnets but the routed network's.
  const script = `require('net').createServer((s) => s.end('seen ' + s.remoteAddress + '\\n')).listen(9000, 'fd00:99::2')`;
  const started = await inOut(['sh', '-c', `${process.execPath} -e "${script}" >/dev/null 2>&1 & echo $!`]);
  outPids.push(started.stdout.trim());
  await inOut(['ip', '-6', 'route', 'del', 'default']);
  await dual('10.93.4.0/24', 'fd00:93:4::/64', 'routed6', ['-d', 'ovsnet', '-o', 'com.docker.network.bridge.enable_ip_masquerade=false']);
  await inOut(['ip', '-6', 'route', 'add', 'fd00:93:4::/64', 'via', 'fd00:99::1']);
  await host.dockerOk(['run', '-d', '--name', 'rt1', '--network', 'routed6', IMAGE, 'sleep', '600']);
  const rt1 = await v6Of('rt1', 'routed6');
  t.equal(await tcp6('a1', 'fd00:99::2', 9000, 25), 'seen fd00:99::1', "masqueraded (the default): the outside sees the host's address");
  t.equal(await tcp6('rt1', 'fd00:99::2', 9000, 25), `seen ${rt1}`, "enable_ip_masquerade=false: the container's own address");
  const rules = (await host.exec(['ip6tables', '-t', 'nat', '-S', 'OVSNET-POSTROUTING'])).stdout;
  t.match(rules, /-s fd00:93:1::\/64 ! -o ovg\S+ .*-j MASQUERADE/, 'the MASQUERADE rule of the default network');
  t.notMatch(rules, /fd00:93:4::/, 'none for the routed one');
});
