/**
 * cluster.test.ts's case for endpoint groups of a logical network across hosts, on its hosts:
 * a dual-stack parent `shop` on h1 and h2, group `web` on both, `other` on h1, `db` on h2
 * allowing web on 7001/tcp only. Every verdict is traffic: what is allowed connects, what is not
 * times out, IPv4 and IPv6, new connections and replies, a frame put straight onto the tunnel
 * toward db's MAC, ARP across hosts; `ovsnet trace` on h1 says why; and again after
 * ovs-vswitchd restarts on db's host (cluster.test.ts's restart, shared).
 */
import type { Test } from 'tap';
import { CREATE_OVSNET, IMAGE, MAIN } from '../harness/host.js';
import type { MultiHost } from './cluster-setup.js';
import { until } from './cluster-setup.js';

const SUBNET = '10.214.0.0/24';
const SUBNET6 = 'fd5e:214::/64';

/** The case; returns the checks to run after ovs-vswitchd restarted on h2, which remove what it made. */
export async function groupsAcrossHosts(t: Test, m: MultiHost): Promise<(t: Test) => Promise<void>> {
  const dual = ['--ipv6', '--subnet', SUBNET6];
  for (const i of [0, 1]) await m.createLogical(i, 'shop', SUBNET, dual);
  const group = (i: number, name: string, extra: readonly string[] = []) =>
    m.dockerOk(i, [
      ...CREATE_OVSNET,
      '--subnet',
      SUBNET,
      ...dual,
      '--ipam-opt',
      `ovsnet.group=${name}`,
      '-o',
      `ovsnet.group=${name}`,
      '-o',
      'ovsnet.network=shop',
      ...extra,
      name,
    ]);
  await group(0, 'web');
  await group(0, 'other');
  await group(1, 'web');
  await group(1, 'db', ['-o', 'ovsnet.allow=web:7001/tcp']);
  const admin = ['--cap-add', 'NET_ADMIN'];
  const run = (i: number, name: string, net: string) =>
    m.dockerOk(i, ['run', '-d', '--name', name, '--network', net, ...admin, IMAGE, 'sleep', '600']);
  await Promise.all([run(0, 'gw1', 'web'), run(0, 'go1', 'other'), run(0, 'gp1', 'shop'), run(1, 'gw2', 'web'), run(1, 'gd2', 'db')]);
  const ip = (i: number, c: string, net: string, field = 'IPAddress') =>
    m.dockerOk(i, ['inspect', '-f', `{{(index .NetworkSettings.Networks "${net}").${field}}}`, c]);
  const [d2, w2, d2v6, d2mac] = [
    await ip(1, 'gd2', 'db'),
    await ip(1, 'gw2', 'web'),
    await ip(1, 'gd2', 'db', 'GlobalIPv6Address'),
    await ip(1, 'gd2', 'db', 'MacAddress'),
  ];
  const w1 = await ip(0, 'gw1', 'web');
  for (const port of [7001, 7002])
    await m.dockerOk(1, ['exec', '-d', 'gd2', 'sh', '-c', `while true; do echo pong | nc -l -p ${port}; done`]);
  await m.dockerOk(0, ['exec', '-d', 'gw1', 'sh', '-c', 'while true; do echo pong | nc -l -p 7001; done']);
  const tcp = async (i: number, from: string, to: string, port: number) =>
    (await m.docker(i, ['exec', from, 'sh', '-c', `echo hi | nc -w 2 ${to} ${port}`])).stdout.includes('pong');
  const ping = async (i: number, from: string, to: string) =>
    (await m.docker(i, ['exec', from, 'ping', `-${to.includes(':') ? 6 : 4}`, '-c', '1', '-W', '2', to])).code === 0;

  // The remote members' flows follow the records within moments of the containers' start.
  const ready = await until(() => tcp(0, 'gw1', d2, 7001), 10_000);
  t.ok(ready < 10_000, `web (h1) -> db (h2) on 7001/tcp, allowed: connects (${ready} ms after the start)`);
  // Each refusal waits out its timeout: they run side by side, each in its own container process.
  const [v6, port, icmp, other, other6, parent, back, same, sameBack] = await Promise.all([
    tcp(0, 'gw1', d2v6, 7001),
    tcp(0, 'gw1', d2, 7002),
    ping(0, 'gw1', d2),
    tcp(0, 'go1', d2, 7001),
    tcp(0, 'go1', d2v6, 7001),
    tcp(0, 'gp1', d2, 7001),
    tcp(1, 'gd2', w1, 7001),
    ping(0, 'gw1', w2),
    ping(1, 'gw2', w1),
  ]);
  t.ok(v6, 'the same over IPv6');
  t.notOk(port, 'web -> db on 7002/tcp, not allowed: no connection');
  t.notOk(icmp, 'web -> db, ICMP, not allowed');
  t.notOk(other, 'other (h1) -> db (h2): no connection');
  t.notOk(other6, 'other -> db over IPv6: no connection');
  t.notOk(parent, "the parent's own container (h1) -> db (h2): no connection");
  t.notOk(back, 'db (h2) -> web (h1), a new connection web does not allow: none');
  t.ok(same, 'web (h1) -> web (h2): the same group, across hosts');
  t.ok(sameBack, 'and back');

  // A frame straight to db's MAC: the parent's container (whose segment the tunnels carry) is
  // told db's address is at db's MAC; h2 delivers nothing from the tunnel that its bridge did not route.
  for (const c of ['gp1', 'go1']) {
    await m.dockerOk(0, ['exec', c, 'busybox', 'arp', '-s', d2, d2mac]);
    t.notOk(await tcp(0, c, d2, 7001), `${c} -> db's MAC directly: no connection`);
    t.notOk(await ping(0, c, d2), `${c} -> db's MAC directly: no ping`);
  }
  // ARP: gp1 asks for db's address; the answer is h1's gateway, never db, and db never hears it.
  const gp1mac = await ip(0, 'gp1', 'shop', 'MacAddress');
  await m.docker(0, ['exec', 'gp1', 'busybox', 'arp', '-d', d2]);
  const arping = await m.docker(0, ['exec', 'gp1', 'busybox', 'arping', '-c', '2', '-w', '3', '-I', 'eth0', d2]);
  t.notMatch(arping.stdout.toLowerCase(), d2mac.toLowerCase(), `ARP for db's address is not answered by db: ${arping.stdout.trim()}`);
  const neigh = await m.dockerOk(1, ['exec', 'gd2', 'ip', 'neigh', 'show']);
  t.notMatch(neigh.toLowerCase(), gp1mac.toLowerCase(), "db never learnt the parent container's MAC");

  // ovsnet trace on h1 explains both verdicts with the option that made them.
  const trace = async (from: string, to: string) =>
    (await m.host(0).exec(['env', ...Object.entries(m.env(0)).map(([k, v]) => `${k}=${v}`), process.execPath, MAIN, 'trace', from, to]))
      .stdout;
  const allowed = await trace('gw1', `${d2}:7001/tcp`);
  t.match(allowed, /allowed: db allows web on 7001\/tcp/, 'trace: allowed, and by which option');
  t.match(
    allowed,
    /verdict .*; delivered to port ovh\S+ \(endpoint [0-9a-f]{12} on host h2\)/,
    "and, traced by h2's ovsnet on its bridge, delivered to db's port there",
  );
  t.comment(`$ ovsnet trace gw1 ${d2}:7001/tcp\n${allowed}`);
  t.match(await trace('go1', `${d2}:7001/tcp`), /dropped: db does not allow other/, 'trace: dropped, and why');

  return async (t: Test) => {
    // Called after cluster.test.ts restarted ovs-vswitchd on h2 (db's host).
    const back = await until(() => tcp(0, 'gw1', d2, 7001), 20_000);
    t.ok(back < 20_000, `ovs-vswitchd restarted on h2: web -> db connects again (${back} ms)`);
    t.notOk(await tcp(0, 'go1', d2, 7001), 'and other -> db still does not');
    t.notOk(await tcp(0, 'gp1', d2, 7001), "nor the parent's container, by db's MAC");
    await m.dockerOk(0, ['rm', '-f', 'gw1', 'go1', 'gp1']);
    await m.dockerOk(1, ['rm', '-f', 'gw2', 'gd2']);
    for (const n of ['web', 'other', 'shop']) await m.dockerOk(0, ['network', 'rm', n]);
    for (const n of ['web', 'db', 'shop']) await m.dockerOk(1, ['network', 'rm', n]);
  };
}
