/** host-nets.ts reads /proc/net/route and ipv6_route (fixtures here) and the interfaces' addresses. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { formatPrefix } from '../../src/lib/cidr.js';
import { hostNets } from '../../src/host/host-nets.js';

t.test('connected routes, routes via a gateway, addresses; no default, loopback or link-scoped entry', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-procnet-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(
    path.join(dir, 'route'),
    [
      'Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT',
      'eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0', // default via 192.0.2.1
      'eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0', // 192.0.2.0/24 connected
      'eth0\t000014AC\t010200C0\t0003\t0\t0\t0\t0000FFFF\t0\t0\t0', // 172.20.0.0/16 via 192.0.2.1
      'lo\t0000007F\t00000000\t0001\t0\t0\t0\t000000FF\t0\t0\t0',
    ].join('\n'),
  );
  fs.writeFileSync(
    path.join(dir, 'ipv6_route'),
    [
      'fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0',
      'fd990000000000000000000000000000 30 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     eth0',
      'fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000002 00000000 00000001     eth0',
      '00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     eth0',
      'fd000000000000000000000000000002 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000003 00000000 80200001       lo',
    ].join('\n'),
  );
  const nets = hostNets(dir);
  const routes = nets.filter((n) => n.kind !== 'address').map((n) => `${formatPrefix(n.prefix)} ${n.dev} ${n.kind}`);
  t.same(routes, [
    '192.0.2.0/24 eth0 connected route',
    '172.20.0.0/16 eth0 route',
    'fd00::/64 eth0 connected route',
    'fd99::/48 eth0 route',
  ]);
  const own = Object.values(os.networkInterfaces())
    .flatMap((l) => l ?? [])
    .filter((a) => !a.internal && a.family === 'IPv4')
    .map((a) => `${a.address}/32`);
  const addresses = nets.filter((n) => n.kind === 'address').map((n) => formatPrefix(n.prefix));
  for (const a of own) t.ok(addresses.includes(a), `the host's address ${a}`);
  t.notOk(
    addresses.some((a) => a.startsWith('127.') || a.startsWith('fe80')),
    'no loopback or link-local address',
  );
});
