/** Moving the host's addresses and routes between the uplink and its host port (iproute2, faked here). */
import t from 'tap';
import { HostIp, routeArgs } from '../../../src/driver/uplink/host-ip.js';
import { trunkList } from '../../../src/driver/uplink/uplink-ovsdb.js';

const ADDR = JSON.stringify([
  {
    ifname: 'eth1',
    addr_info: [
      { family: 'inet', local: '192.0.2.5', prefixlen: 24, scope: 'global', valid_life_time: 4294967295 },
      { family: 'inet', local: '198.51.100.7', prefixlen: 24, scope: 'global', dynamic: true, valid_life_time: 3600 },
      { family: 'inet6', local: 'fe80::1', prefixlen: 64, scope: 'link' },
    ],
  },
]);
const ROUTES4 = JSON.stringify([
  { dst: 'default', gateway: '192.0.2.1', dev: 'eth1', protocol: 'static', flags: ['onlink'] },
  { dst: '192.0.2.0/24', dev: 'eth1', protocol: 'kernel', scope: 'link', prefsrc: '192.0.2.5' },
  { dst: '10.9.0.0/16', gateway: '192.0.2.9', dev: 'eth1', metric: 20, table: '100' },
  { type: 'local', dst: '192.0.2.5', dev: 'eth1', table: 'local', protocol: 'kernel' },
]);

/** A fake `ip`: answers the reads, records the writes, fails the one matching `failOn`. */
function fakeIp(failOn?: RegExp) {
  const calls: string[] = [];
  const ip = new HostIp(async (_cmd, args) => {
    const line = args.join(' ');
    if (line.includes('addr show')) return { code: 0, stdout: ADDR, stderr: '' };
    if (line.startsWith('-4 -j route')) return { code: 0, stdout: ROUTES4, stderr: '' };
    if (line.startsWith('-6 -j route')) return { code: 0, stdout: '[]', stderr: '' };
    calls.push(line);
    return failOn?.test(line) === true
      ? { code: 2, stdout: '', stderr: 'RTNETLINK answers: Network is unreachable' }
      : { code: 0, stdout: '', stderr: '' };
  });
  return { ip, calls };
}

t.test('global addresses (leased ones marked), routes but the kernel-made and local ones', async (t) => {
  const { ip } = fakeIp();
  t.same(await ip.addresses('eth1'), [
    { cidr: '192.0.2.5/24', family: 4, dynamic: false },
    { cidr: '198.51.100.7/24', family: 4, dynamic: true },
  ]);
  const routes = await ip.routes('eth1');
  t.same(
    routes.map((r) => routeArgs(r, 'ovsnet-host').join(' ')),
    ['default via 192.0.2.1 dev ovsnet-host proto static onlink', '10.9.0.0/16 via 192.0.2.9 dev ovsnet-host metric 20 table 100'],
  );
});

t.test('a move adds first, reroutes, then removes; a failure puts back what it moved', async (t) => {
  const ok = fakeIp();
  const addresses = [{ cidr: '192.0.2.5/24', family: 4 as const, dynamic: false }];
  const routes = await ok.ip.routes('eth1');
  await ok.ip.move('eth1', 'ovsnet-host', addresses, routes);
  t.same(ok.calls, [
    '-4 addr replace 192.0.2.5/24 dev ovsnet-host',
    '-4 route replace default via 192.0.2.1 dev ovsnet-host proto static onlink',
    '-4 route replace 10.9.0.0/16 via 192.0.2.9 dev ovsnet-host metric 20 table 100',
    '-4 addr del 192.0.2.5/24 dev eth1',
  ]);
  const bad = fakeIp(/10\.9\.0\.0\/16 via 192\.0\.2\.9 dev ovsnet-host/);
  await t.rejects(bad.ip.move('eth1', 'ovsnet-host', addresses, routes), {
    code: 'LINK_FAILED',
    message: /ip -4 route replace 10\.9\.0\.0\/16 .* failed \(2\): RTNETLINK answers: Network is unreachable/,
  });
  t.same(
    bad.calls.slice(3),
    [
      '-4 addr replace 192.0.2.5/24 dev eth1',
      '-4 route replace default via 192.0.2.1 dev eth1 proto static onlink',
      '-4 addr del 192.0.2.5/24 dev ovsnet-host',
    ],
    'the address and the route moved so far are back on eth1',
  );
});

t.test('the trunk always carries untagged traffic, then the tags once each, in order', async (t) => {
  t.same(trunkList([]), [0]);
  t.same(trunkList([7, 3, 7]), [0, 3, 7]);
});
