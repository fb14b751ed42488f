/**
 * IPv6 as IPv4 is, with real Docker (issue 26): dual-stack ovsnet networks isolated over IPv6
 * from each other and from a Docker bridge network with --ipv6, tried by traffic (new TCP
 * connections and ICMPv6 echo). One host for all.
 */
import t from 'tap';
import { DockerHost, IMAGE } from '../harness/host.js';

const host = await DockerHost.up('six', { dockerdArgs: '--experimental --ip6tables' });
const ovsnet = await host.startOvsnet();
t.teardown(async () => {
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
