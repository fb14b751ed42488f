/**
 * Port publishing and inbound isolation with real Docker: a range
 * publishes one free port, `-p 80` picks one, a port a host process or another container holds
 * is refused, the host's loopback services are never captured while 127.0.0.1:PORT still reaches
 * the container, and nothing but replies and published ports gets in from outside the network.
 * "Outside" is a namespace the test routes through the host (192.168.213.2, host 192.168.213.1).
 */
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { DockerHost, IMAGE, pluginCall, run } from '../harness/host.js';

const host = await DockerHost.up('ports');
const ovsnet = await host.startOvsnet();
const out = `ovo-${randomBytes(3).toString('hex')}`;
const outPids: string[] = [];
t.teardown(async () => {
  for (const pid of outPids) await run('kill', [pid]);
  await run('ip', ['netns', 'del', out]);
  await host.down();
  await ovsnet.kill('SIGTERM');
});

const sh = async (args: string[]) => (await host.exec(args)).stdout.trim();
const inOut = (args: string[]) => run('ip', ['netns', 'exec', out, ...args], { timeoutMs: 20_000 });
const body = (name: string) => ['sh', '-c', `while true; do printf "HTTP/1.0 200 OK\\r\\n\\r\\n${name}" | nc -l -p 80; done`];
type From = (args: string[]) => Promise<{ code: number | null; stdout: string }>;
const fromHost: From = (args) => host.exec(args);
const fromOut: From = (args) => inOut(args);
const fromContainer =
  (c: string): From =>
  (args) =>
    host.docker(['exec', c, ...args]);
/**
 * The body a server sends on IP:PORT, seen from `from` ('' when nothing answers), tried
 * `tries` times: by default for 10 s and more, a wide bound for a fresh container's listener
 * to come up on a loaded machine (3 s was too short in a CI run); checks that expect nothing
 * pass a small count. busybox nc (busybox wget -T crashes on this Debian).
 */
const get = async (from: From, ip: string, port: number, tries = 50) => {
  for (let i = 0; i < tries; i++) {
    const r = await from(['sh', '-c', `busybox nc -w 2 ${ip} ${port} </dev/null`]);
    const text = r.stdout.split('\r\n\r\n')[1];
    if (r.code === 0 && text !== undefined) return text;
    if (i < tries - 1) await new Promise((r) => setTimeout(r, 200));
  }
  return '';
};
/** A host process serving `text` on ADDR:PORT (node: busybox nc cannot bind one address); runs until the host goes. */
const hostServer = (port: number, text: string, addr = '0.0.0.0') =>
  host.exec([
    'sh',
    '-c',
    `${process.execPath} -e 'require("net").createServer((s) => s.on("error", () => {}).end("HTTP/1.0 200 OK\\r\\n\\r\\n${text}")).listen(${port}, "${addr}")' >/dev/null 2>&1 &`,
  ]);
const endpointOf = async (c: string) => ({
  NetworkID: await host.dockerOk(['network', 'inspect', '-f', '{{.Id}}', 'pub']),
  EndpointID: await host.dockerOk(['inspect', '-f', '{{(index .NetworkSettings.Networks "pub").EndpointID}}', c]),
});
/** The host ports EndpointOperInfo reports for a container. */
const publishedOf = async (c: string) => {
  const res = await pluginCall(ovsnet.socket, 'NetworkDriver.EndpointOperInfo', await endpointOf(c));
  const value = (res.body as { Value: Record<string, unknown> }).Value;
  return (value['com.docker.network.portmap'] as { HostPort: number; HostPortEnd: number; Port: number }[] | undefined) ?? [];
};
const dnatLines = async (c: string) => {
  const ep = (await endpointOf(c)).EndpointID.slice(0, 12);
  return (await sh(['iptables', '-t', 'nat', '-S', 'OVSNET-DNAT'])).split('\n').filter((l) => l.includes(ep));
};

await t.test('setup: a network, and an outside namespace routed through the host', async () => {
  await host.dockerOk(['network', 'create', '-d', 'ovsnet', '--subnet', '10.61.1.0/24', 'pub']);
  await run('ip', ['netns', 'add', out]);
  await run('ip', ['link', 'add', 'vout', 'netns', host.name, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', out]);
  await host.exec(['ip', 'addr', 'add', '192.168.213.1/24', 'dev', 'vout']);
  await host.exec(['ip', 'link', 'set', 'vout', 'up']);
  await inOut(['ip', 'addr', 'add', '192.168.213.2/24', 'dev', 'eth0']);
  await inOut(['ip', 'link', 'set', 'eth0', 'up']);
  await inOut(['ip', 'link', 'set', 'lo', 'up']);
  await inOut(['ip', 'route', 'add', 'default', 'via', '192.168.213.1']);
  await host.exec(['sysctl', '-qw', 'net.ipv4.ip_forward=1']);
});

await t.test('-p 1-65535:80 publishes ONE free port of the range, never the host port a service holds', async (t) => {
  await hostServer(1, 'host-service-on-1');
  t.equal(await get(fromHost, '192.168.213.1', 1), 'host-service-on-1', 'a host service on port 1 (first of the range)');
  await host.dockerOk(['run', '-d', '--name', 'wide', '--network', 'pub', '-p', '1-65535:80', IMAGE, ...body('wide')]);
  const [p] = await publishedOf('wide');
  t.equal(p?.HostPort, 2, 'EndpointOperInfo: the first free port of the range (1 is taken)');
  t.equal(p?.HostPortEnd, 2);
  t.equal((await dnatLines('wide')).length, 1, 'one DNAT rule');
  t.match((await dnatLines('wide'))[0], /--dport 2 /);
  t.equal(await get(fromOut, '192.168.213.1', 2), 'wide', 'the port taken reaches the container');
  t.equal(await get(fromOut, '192.168.213.1', 1), 'host-service-on-1', "the host's own service still answers on its port");
  await hostServer(3, 'host-service-on-3');
  t.equal(await get(fromOut, '192.168.213.1', 3), 'host-service-on-3', "other ports of the range stay the host's");
  t.comment(`docker port wide: ${JSON.stringify(await host.dockerOk(['port', 'wide']))}`);
});

await t.test('-p 80 (HostPort 0) publishes a free port of the dynamic range', async (t) => {
  await host.dockerOk(['run', '-d', '--name', 'any', '--network', 'pub', '-p', '80', IMAGE, ...body('any')]);
  const [p] = await publishedOf('any');
  t.ok(p !== undefined && p.HostPort >= 32768 && p.HostPort <= 60999, `a port of the dynamic range: ${p?.HostPort}`);
  t.equal(await get(fromOut, '192.168.213.1', p?.HostPort ?? 0), 'any');
});

await t.test('loopback: a host service is never captured, published ports answer on 127.0.0.1 and hold their port', async (t) => {
  await hostServer(15432, 'host-db', '127.0.0.1');
  t.equal(await get(fromHost, '127.0.0.1', 15432), 'host-db');
  const taken = await host.docker(['run', '-d', '--name', 'db', '--network', 'pub', '-p', '15432:80', IMAGE, ...body('container')]);
  t.not(taken.code, 0, 'publishing the port of a host service is refused');
  t.match(taken.stderr, /host tcp port 15432 on 0\.0\.0\.0 is in use by a process of this host: publish another port/);
  t.equal(await get(fromHost, '127.0.0.1', 15432), 'host-db', 'the host still reaches its own service on loopback');
  await host.dockerOk(['run', '-d', '--name', 'web', '--network', 'pub', '-p', '18080:80', IMAGE, ...body('web')]);
  t.equal(await get(fromHost, '127.0.0.1', 18080), 'web', '127.0.0.1:PORT reaches the container');
  t.equal(await get(fromHost, '192.168.213.1', 18080), 'web', "and the host's own address");
  t.equal(await get(fromOut, '192.168.213.1', 18080), 'web', 'and other machines');
  const late = await host.exec(['timeout', '2', 'busybox', 'nc', '-l', '-p', '18080']);
  t.equal(late.code, 1, `a host process started later cannot take the port (${late.stderr.trim()})`);
});

await t.test('a host port another container holds is refused with the reason', async (t) => {
  const again = await host.docker(['run', '-d', '--name', 'web2', '--network', 'pub', '-p', '18080:80', IMAGE, ...body('web2')]);
  t.not(again.code, 0);
  t.match(again.stderr, /host tcp port 18080 on 0\.0\.0\.0 is in use by the ovsnet endpoint [0-9a-f]{12}/);
  t.equal(await get(fromOut, '192.168.213.1', 18080), 'web', 'the first keeps it');
  await host.dockerOk(['rm', '-f', 'web']);
  await host.dockerOk(['rm', '-f', 'web2']);
  await host.dockerOk(['run', '-d', '--name', 'web3', '--network', 'pub', '-p', '18080:80', IMAGE, ...body('web3')]);
  // The port is free again: the next container gets it (its traffic is not asserted here: a fresh
  // container may resolve its gateway to its own veth's host end, the ARP finding
  // that driver/links/host-end.ts closes; traffic to published ports is asserted above and below).
  t.same(
    (await publishedOf('web3')).map((p) => p.HostPort),
    [18080],
    'freed with its container: the next one gets it',
  );
  t.match((await dnatLines('web3'))[0], /--dport 18080 .*--to-destination [\d.]+:80/);
});

await t.test('inbound: only replies and published ports reach a container (finding 3)', async (t) => {
  const server7000 = `(while true; do printf "HTTP/1.0 200 OK\\r\\n\\r\\niso7000" | nc -l -p 7000; done) &`;
  await host.dockerOk([
    'run',
    '-d',
    '--name',
    'iso',
    '--network',
    'pub',
    '-p',
    '18090:80',
    IMAGE,
    'sh',
    '-c',
    `${server7000} ${body('iso')[2] ?? ''}`,
  ]);
  const iso = await host.dockerOk(['inspect', '-f', '{{(index .NetworkSettings.Networks "pub").IPAddress}}', 'iso']);
  await host.dockerOk(['run', '-d', '--name', 'peer', '--network', 'pub', IMAGE, 'sleep', '600']);
  t.equal(await get(fromContainer('peer'), iso, 7000), 'iso7000', 'a container of the same network reaches the unpublished port');
  await host.dockerOk(['run', '-d', '--name', 'onbridge', '--network', 'bridge', IMAGE, 'sleep', '600']);
  t.equal(await get(fromContainer('onbridge'), iso, 7000, 2), '', "a container on Docker's bridge network cannot");
  t.equal(await get(fromOut, iso, 7000, 2), '', 'a machine routing through the host cannot');
  t.equal(await get(fromOut, '192.168.213.1', 18090), 'iso', 'the published port still answers from outside');
  const pid = (
    await inOut([
      'sh',
      '-c',
      `(while true; do printf "HTTP/1.0 200 OK\\r\\n\\r\\noutside" | busybox nc -l -p 9000; done) >/dev/null 2>&1 & echo $!`,
    ])
  ).stdout.trim();
  outPids.push(pid);
  t.equal(await get(fromContainer('iso'), '192.168.213.2', 9000), 'outside', 'the container reaches outside through the masquerade');
});

await t.test('published ports go with their containers; none left', async (t) => {
  const all = (await host.dockerOk(['ps', '-aq'])).split('\n').filter((x) => x !== '');
  await host.dockerOk(['rm', '-f', ...all]);
  t.equal(await sh(['sh', '-c', 'iptables -t nat -S OVSNET-DNAT | grep -c -- "-j DNAT" || true']), '0', 'no DNAT rule');
  const r = await host.exec(['timeout', '1', 'busybox', 'nc', '-l', '-p', '18080']);
  t.equal(r.code, 124, 'the host port is free again (a host process can listen)');
});
