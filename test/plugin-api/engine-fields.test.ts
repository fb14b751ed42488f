/**
 * What Engine 25-29 added to the remote driver protocol, through the routes with in-memory OVS:
 * GwAllocChecker and GwAllocCheck (28, moby#49372), enable_ipv4=false (28, moby#48271) with an
 * IPv6-only pool, the endpoint's ifname (28, moby#49155) answered as DstName, Docker's own
 * endpoint keys (sysctls, 27, moby#47686) passed over, and the gateway endpoint moving between two
 * networks (28-29, moby#50321) with the published ports following. Each new field's hostile
 * values refused naming it, nothing changed. The same on the real daemon: test/e2e/replay.test.ts.
 */
import t from 'tap';
import { pluginApp } from '../helpers/plugin-app.js';

const { docker, fx, state } = pluginApp(t, 'engine');

const V6NET = '6a'.repeat(32);
const NET_A = '1a'.repeat(32);
const NET_B = '1b'.repeat(32);
const IFNAME = 'com.docker.network.endpoint.ifname';
const GENERIC = 'com.docker.network.generic';
/** CreateNetwork of 10.6<third>.0.0/24, as Docker sends it. */
const net = (NetworkID: string, third: number) => ({
  NetworkID,
  Options: { [GENERIC]: {} },
  IPv4Data: [{ AddressSpace: 'LocalDefault', Pool: `10.6${third}.0.0/24`, Gateway: `10.6${third}.0.1/24` }],
  IPv6Data: [],
});

t.test('GetCapabilities reports GwAllocChecker; GwAllocCheck answers exactly SkipIPv4 and SkipIPv6', async (t) => {
  t.same((await docker('NetworkDriver.GetCapabilities')).body, { Scope: 'local', ConnectivityScope: 'local', GwAllocChecker: true });
  const check = async (Options: unknown) => docker('NetworkDriver.GwAllocCheck', { Options });
  const plain = { 'com.docker.network.enable_ipv4': true, 'com.docker.network.enable_ipv6': true, [GENERIC]: { 'ovsnet.tag': '9' } };
  t.same(await check(plain), { status: 200, body: { SkipIPv4: false, SkipIPv6: false }, contentType: 'application/json; charset=utf-8' });
  t.same((await check({ ...plain, 'com.docker.network.internal': true })).body, { SkipIPv4: true, SkipIPv6: true }, '--internal');
  const group = { ...plain, [GENERIC]: { 'ovsnet.network': 'app', 'ovsnet.group': 'web' } };
  t.same((await check(group)).body, { SkipIPv4: true, SkipIPv6: true }, 'an endpoint group');
  t.same((await check(null)).body, { SkipIPv4: false, SkipIPv6: false }, 'no options');
  t.same((await docker('NetworkDriver.GwAllocCheck')).body, { SkipIPv4: false, SkipIPv6: false }, 'an empty body');
  const before = await state();
  const bad: [unknown, RegExp][] = [
    [[], /^GwAllocCheck: Options must be an object$/],
    ['internal', /^GwAllocCheck: Options must be an object$/],
    [{ [GENERIC]: { 'ovsnet.group': 7 } }, /^GwAllocCheck: Options: com.docker.network.generic.ovsnet.group must be a string, got 7$/],
    [{ [GENERIC]: [] }, /^GwAllocCheck: Options: com.docker.network.generic must be an object of strings$/],
    [
      { 'com.docker.network.enable_ipv4': 'false' },
      /^GwAllocCheck: Options.com.docker.network.enable_ipv4 must be true or false, got "false"$/,
    ],
    [
      { 'com.docker.network.enable_ipv4': 'x'.repeat(100_000) },
      /enable_ipv4 must be true or false, got "x{79}\.\.\. \(100002 characters\)$/,
    ],
  ];
  for (const [Options, err] of bad) {
    const res = await check(Options);
    t.equal(res.status, 500);
    t.match(res.body, { Err: err });
    t.notOk('SkipIPv4' in res.body, 'a refusal carries no answer');
  }
  t.equal(await state(), before, 'GwAllocCheck changes nothing');
});

t.test('an IPv6-only network as Engine 28 creates it: a v6 pool only, no IPv4 gateway, an endpoint joined', async (t) => {
  const pool = await docker('IpamDriver.RequestPool', {
    AddressSpace: 'LocalDefault',
    Pool: 'fd00:60::/64',
    SubPool: '',
    Options: {},
    V6: true,
  });
  t.same(pool.body, { PoolID: 'LocalDefault/fd00:60::/64', Pool: 'fd00:60::/64', Data: {} });
  const PoolID = 'LocalDefault/fd00:60::/64';
  const gw = await docker('IpamDriver.RequestAddress', {
    PoolID,
    Address: '',
    Options: { RequestAddressType: 'com.docker.network.gateway' },
  });
  t.same(gw.body, { Address: 'fd00:60::1/64', Data: {} });
  const options = { 'com.docker.network.enable_ipv4': false, 'com.docker.network.enable_ipv6': true, [GENERIC]: {} };
  const IPv6Data = [{ AddressSpace: 'LocalDefault', Pool: 'fd00:60::/64', Gateway: 'fd00:60::1/64' }];
  const before = await state();
  const mixed = await docker('NetworkDriver.CreateNetwork', {
    NetworkID: V6NET,
    Options: options,
    IPv4Data: [{ AddressSpace: 'LocalDefault', Pool: '10.61.0.0/24', Gateway: '10.61.0.1/24' }],
    IPv6Data,
  });
  t.match(mixed.body, {
    Err: /^CreateNetwork: Options.com.docker.network.enable_ipv4 is false but IPv4Data has 1 entries; expected no IPv4Data for an IPv6-only network$/,
  });
  t.equal(await state(), before, 'refused: nothing changed');
  t.same((await docker('NetworkDriver.CreateNetwork', { NetworkID: V6NET, Options: options, IPv4Data: [], IPv6Data })).body, {});
  const gatewayPort = [...fx.ovs.ports.keys()].find((p) => p.startsWith('ovg'));
  t.same(
    fx.links.addresses.get(gatewayPort ?? ''),
    ['fd000060000000000000000000000001/64'],
    'the gateway port holds its IPv6 address only',
  );
  t.notOk(fx.nat.networks.has(V6NET), 'no IPv4 masquerade');
  const addr = await docker('IpamDriver.RequestAddress', { PoolID, Address: '', Options: { 'com.docker.network.endpoint.name': 'web' } });
  t.equal(addr.body.Address, 'fd00:60::2/64', 'the endpoint name (Engine 29) is accepted');
  const ids = { NetworkID: V6NET, EndpointID: '6e'.repeat(32) };
  const iface = { Address: '', AddressIPv6: 'fd00:60::2/64', MacAddress: '' };
  t.equal((await docker('NetworkDriver.CreateEndpoint', { ...ids, Interface: iface, Options: {} })).status, 200);
  const join = await docker('NetworkDriver.Join', { ...ids, SandboxKey: '/var/run/docker/netns/v6', Options: {} });
  t.match(join.body, { Gateway: '', GatewayIPv6: 'fd00:60::1', InterfaceName: { DstPrefix: 'eth' } });
  t.equal((await docker('NetworkDriver.Leave', ids)).status, 200);
  t.equal((await docker('NetworkDriver.DeleteEndpoint', ids)).status, 200);
});

t.test('ifname answered as DstName beside DstPrefix; Docker-owned endpoint keys passed over; hostile values refused', async (t) => {
  t.equal((await docker('NetworkDriver.CreateNetwork', net(NET_A, 2))).status, 200);
  const endpoint = (EndpointID: string, Options: Record<string, unknown>, n = 5) => ({
    NetworkID: NET_A,
    EndpointID,
    Interface: { Address: `10.62.0.${n}/24`, AddressIPv6: '', MacAddress: '' },
    Options,
  });
  const e1 = { NetworkID: NET_A, EndpointID: 'e1'.repeat(32) };
  const sysctls = 'net.ipv4.conf.IFNAME.log_martians=1,net.ipv6.conf.IFNAME.accept_ra=0';
  const keys = { [IFNAME]: 'data0', 'com.docker.network.endpoint.sysctls': sysctls, 'com.docker.network.endpoint.future': { any: 1 } };
  t.equal((await docker('NetworkDriver.CreateEndpoint', endpoint(e1.EndpointID, keys))).status, 200);
  const join = await docker('NetworkDriver.Join', { ...e1, SandboxKey: '/var/run/docker/netns/x', Options: {} });
  t.same(join.body.InterfaceName, { SrcName: `ovc${'e1'.repeat(6)}`, DstPrefix: 'eth', DstName: 'data0' });
  const e2 = { NetworkID: NET_A, EndpointID: 'e2'.repeat(32) };
  t.equal((await docker('NetworkDriver.CreateEndpoint', endpoint(e2.EndpointID, {}, 6))).status, 200);
  const plain = await docker('NetworkDriver.Join', { ...e2, SandboxKey: '/var/run/docker/netns/y', Options: {} });
  t.same(plain.body.InterfaceName, { SrcName: `ovc${'e2'.repeat(6)}`, DstPrefix: 'eth' }, 'no ifname asked: DstPrefix alone');
  const before = await state();
  const field = `Options.${IFNAME}`;
  for (const v of [
    '',
    'x'.repeat(16),
    'a/b',
    'a b',
    'tab\t',
    '.',
    '..',
    'a:1',
    'é',
    'nul\u0000',
    42,
    true,
    { a: 1 },
    ['eth1'],
    'y'.repeat(200_000),
  ]) {
    const res = await docker('NetworkDriver.CreateEndpoint', endpoint('e3'.repeat(32), { [IFNAME]: v }, 7));
    t.equal(res.status, 500, `ifname ${JSON.stringify(v).slice(0, 20)}`);
    t.match(res.body, { Err: `CreateEndpoint: ${field} is ` });
    t.match(res.body, {
      Err: /expected an interface name: 1 to 15 printable ASCII characters without "\/", ":" or spaces, not "\." or "\.\."/,
    });
    t.ok(String(res.body.Err).length < 400, 'a bounded message');
  }
  const unknown = await docker('NetworkDriver.CreateEndpoint', endpoint('e3'.repeat(32), { 'ovsnet.bogus': '1' }, 7));
  t.match(unknown.body, { Err: /--driver-opt ovsnet\.bogus is not an ovsnet endpoint option/ });
  t.equal(await state(), before, 'refused: no store key, port, link or rule changed');
});

t.test('the gateway endpoint moves between two networks of one container: published ports follow', async (t) => {
  t.equal((await docker('NetworkDriver.CreateNetwork', net(NET_B, 3))).status, 200);
  const a = { NetworkID: NET_A, EndpointID: 'a1'.repeat(32) };
  const b = { NetworkID: NET_B, EndpointID: 'b1'.repeat(32) };
  // Engine 29: CreateEndpoint carries no port map; Join and ProgramExternalConnectivity carry the sandbox's.
  const sandbox = { 'com.docker.network.portmap': [{ Proto: 6, IP: '', Port: 80, HostIP: '', HostPort: 8080, HostPortEnd: 8080 }] };
  for (const [ids, address] of [
    [a, '10.62.0.9/24'],
    [b, '10.63.0.9/24'],
  ] as const) {
    t.equal(
      (
        await docker('NetworkDriver.CreateEndpoint', {
          ...ids,
          Interface: { Address: address, AddressIPv6: '', MacAddress: '' },
          Options: {},
        })
      ).status,
      200,
    );
    t.equal((await docker('NetworkDriver.Join', { ...ids, SandboxKey: '/var/run/docker/netns/s', Options: sandbox })).status, 200);
  }
  t.same([...fx.nat.ports], [], 'Join publishes nothing');
  await docker('NetworkDriver.ProgramExternalConnectivity', { ...a, Options: sandbox });
  t.same([...fx.nat.ports], [[a.EndpointID, '8080->10.62.0.9:80']], 'A is the gateway endpoint');
  // b takes over (--gw-priority): Docker revokes A first, then programs B.
  await docker('NetworkDriver.RevokeExternalConnectivity', a);
  await docker('NetworkDriver.ProgramExternalConnectivity', {
    ...b,
    Options: { ...sandbox, 'com.docker.network.driver.private.no_proxy_6to4': true },
  });
  t.same([...fx.nat.ports], [[b.EndpointID, '8080->10.63.0.9:80']], 'the port moved to B');
  t.same([...fx.hostPorts.held.keys()], [b.EndpointID], 'only B holds the host port');
  // B leaves: A is the gateway again.
  await docker('NetworkDriver.RevokeExternalConnectivity', b);
  await docker('NetworkDriver.ProgramExternalConnectivity', { ...a, Options: sandbox });
  t.same([...fx.nat.ports], [[a.EndpointID, '8080->10.62.0.9:80']], 'and back to A');
  const info = await docker('NetworkDriver.EndpointOperInfo', b);
  t.notOk('com.docker.network.portmap' in (info.body.Value as object), 'B reports no published port');
});
