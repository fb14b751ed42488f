/**
 * Every field of every request in its valid form, or refused with REQUEST_INVALID naming the
 * field and the form, before anything changes; Docker's own sequences still pass; answers
 * Fastify or Node produce themselves (400, 404, 431, 503 while closing) carry {"Err"} too.
 */
import net from 'node:net';
import path from 'node:path';
import t from 'tap';
import { createLogger } from '../../src/lib/log.js';
import { buildServer } from '../../src/plugin-api/server.js';
import { pluginApp } from '../helpers/plugin-app.js';

const { dir, app, ipam, docker, state } = pluginApp(t, 'val');

const NET = '4f'.repeat(32);
const EP = 'e1'.repeat(32);
const createNetwork = (NetworkID: unknown) => ({
  NetworkID,
  Options: { 'com.docker.network.enable_ipv6': false, 'com.docker.network.generic': { 'ovsnet.tag': '7' } },
  IPv4Data: [{ AddressSpace: 'LocalDefault', Pool: '10.60.0.0/24', Gateway: '10.60.0.1/24', AuxAddresses: { r: '10.60.0.2/24' } }],
  IPv6Data: [],
});

t.test("Docker's sequence for a network and a container still passes", async (t) => {
  const pool = await docker('IpamDriver.RequestPool', {
    AddressSpace: 'LocalDefault',
    Pool: '10.60.0.0/24',
    SubPool: '',
    Options: {},
    V6: false,
  });
  t.equal(pool.status, 200);
  const PoolID = 'LocalDefault/10.60.0.0/24';
  const gw = { PoolID, Address: '10.60.0.1', Options: { RequestAddressType: 'com.docker.network.gateway' } };
  t.same((await docker('IpamDriver.RequestAddress', gw)).body, { Address: '10.60.0.1/24', Data: {} });
  t.same((await docker('IpamDriver.RequestAddress', { PoolID, Address: '10.60.0.2', Options: null })).body.Address, '10.60.0.2/24');
  t.match(await docker('NetworkDriver.CreateNetwork', createNetwork(NET)), { status: 200, body: {} });
  const addr = await docker('IpamDriver.RequestAddress', { PoolID, Address: '', Options: null });
  t.equal(addr.body.Address, '10.60.0.3/24');
  const ids = { NetworkID: NET, EndpointID: EP };
  const created = await docker('NetworkDriver.CreateEndpoint', {
    ...ids,
    Interface: { Address: '10.60.0.3/24', AddressIPv6: '', MacAddress: '' },
    Options: { 'com.docker.network.endpoint.exposedports': [{ Proto: 6, Port: 80 }], 'com.docker.network.portmap': [] },
  });
  t.equal(created.status, 200);
  const join = await docker('NetworkDriver.Join', { ...ids, SandboxKey: '/var/run/docker/netns/abc', Options: null });
  t.equal(join.status, 200);
  t.equal((join.body.InterfaceName as { SrcName: string }).SrcName, `ovc${EP.slice(0, 12)}`);
  t.equal((await docker('NetworkDriver.EndpointOperInfo', ids)).status, 200);
  t.equal((await docker('NetworkDriver.Leave', ids)).status, 200);
  t.equal((await docker('NetworkDriver.DeleteEndpoint', ids)).status, 200);
  t.equal((await docker('IpamDriver.ReleaseAddress', { PoolID, Address: '10.60.0.3' })).status, 200);
  t.equal((await docker('NetworkDriver.FreeNetwork', { NetworkID: NET })).status, 200, 'a swarm-only call still answers');
});

t.test("NetworkID and EndpointID in Docker's form only, refused before any side effect", async (t) => {
  const before = await state();
  const bad: [unknown, RegExp][] = [
    ['+', /NetworkID is "\+"; expected a Docker ID: 64 lowercase hexadecimal characters/],
    [NET.toUpperCase(), /NetworkID is "4F4F.*; expected a Docker ID/],
    [`${NET.slice(0, 63)}\u0000`, /NetworkID is ".*\\u0000"; expected a Docker ID/],
    [`${NET.slice(0, 62)}é`, /expected a Docker ID/],
    [NET.slice(0, 12), /expected a Docker ID/],
    [`${NET}0`, /expected a Docker ID/],
    // A swarm network's ID is 25 lowercase base-36 characters; nothing near it passes.
    ['K2XV9Q7LMZ0C4T1B8YSW3AH6E', /expected a Docker ID.*or a swarm network ID: 25 lowercase letters and digits/],
    ['k2xv9q7lmz0c4t1b8ysw3ah6/', /expected a Docker ID/],
    ['k2xv9q7lmz0c4t1b8ysw3ah6ee', /expected a Docker ID/],
    [42, /NetworkID is 42; expected a Docker ID/],
    [undefined, /NetworkID is missing; expected a Docker ID/],
  ];
  for (const [id, err] of bad) {
    const res = await docker('NetworkDriver.CreateNetwork', createNetwork(id));
    t.equal(res.status, 500, `CreateNetwork ${String(id).slice(0, 20)}`);
    t.match(res.body, { Err: err });
    t.match(res.body, { Err: /^CreateNetwork: / });
  }
  const huge = await docker('NetworkDriver.CreateNetwork', createNetwork('a'.repeat(200_000)));
  t.match(huge.body, { Err: /NetworkID is "a{10,80}\.\.\. \(200002 characters\); expected a Docker ID/ });
  t.ok(String(huge.body.Err).length < 300, 'the refusal quotes a bounded part of the ID');
  const methods = [
    'CreateEndpoint',
    'EndpointOperInfo',
    'Join',
    'Leave',
    'DeleteEndpoint',
    'ProgramExternalConnectivity',
    'RevokeExternalConnectivity',
  ];
  for (const m of methods) {
    for (const ids of [
      { NetworkID: '+', EndpointID: EP },
      { NetworkID: NET, EndpointID: `${EP.slice(0, 12)}` },
      { NetworkID: NET, EndpointID: '../../x' },
    ]) {
      const res = await docker(`NetworkDriver.${m}`, { ...ids, Interface: { Address: '10.60.0.9/24' } });
      t.equal(res.status, 500, m);
      t.match(res.body, { Err: new RegExp(`^${m}: (NetworkID|EndpointID) is .*; expected a Docker ID`) });
    }
  }
  const del = await docker('NetworkDriver.DeleteNetwork', { NetworkID: '*' });
  t.match(del.body, { Err: /DeleteNetwork: NetworkID is "\*"; expected a Docker ID/ });
  t.equal(await state(), before, 'no store key, port, link or rule changed');
});

t.test('every other field in its form: addresses, MACs, pools, PoolIDs, options', async (t) => {
  const before = await state();
  const ids = { NetworkID: NET, EndpointID: 'ab'.repeat(32) };
  const PoolID = 'LocalDefault/10.60.0.0/24';
  const cases: [string, unknown, RegExp][] = [
    ['IpamDriver.ReleaseAddress', { PoolID, Address: 'garbage' }, /ReleaseAddress: Address is "garbage"; expected an IPv4 or IPv6 address/],
    ['IpamDriver.ReleaseAddress', { PoolID, Address: '' }, /ReleaseAddress: Address is empty/],
    [
      'IpamDriver.ReleaseAddress',
      { PoolID: 'x', Address: '10.60.0.2' },
      /ReleaseAddress: PoolID is "x"; expected a PoolID .*LocalDefault\/10\.1\.0\.0\/24/,
    ],
    ['IpamDriver.ReleaseAddress', { PoolID: 'LocalDefault/10.60.0.1/24', Address: '10.60.0.2' }, /PoolID is .*; expected a PoolID/],
    ['IpamDriver.ReleaseAddress', { PoolID: 'Mine/10.60.0.0/24', Address: '10.60.0.2' }, /PoolID is .*; expected a PoolID/],
    ['IpamDriver.ReleasePool', { PoolID: 'LocalDefault/10.60.0.0/24/' }, /ReleasePool: PoolID is .*; expected a PoolID/],
    ['IpamDriver.ReleasePool', {}, /ReleasePool: PoolID is missing; expected a PoolID/],
    [
      'IpamDriver.RequestAddress',
      { PoolID, Address: '10.60.0.300' },
      /RequestAddress: Address is "10\.60\.0\.300"; expected an IPv4 or IPv6 address .*\(or ""\)/,
    ],
    ['IpamDriver.RequestAddress', { PoolID, Address: ' 10.60.0.9' }, /Address is " 10\.60\.0\.9"/],
    [
      'IpamDriver.RequestAddress',
      { PoolID, Address: '', Options: { RequestAddressType: true } },
      /Options\.RequestAddressType must be a string, got true/,
    ],
    [
      'IpamDriver.RequestPool',
      { Pool: '10.61.0.0', V6: false },
      /RequestPool: Pool is "10\.61\.0\.0"; expected an address with its prefix length/,
    ],
    [
      'IpamDriver.RequestPool',
      { Pool: '', SubPool: '10.61.0.0/25' },
      /RequestPool: SubPool \(--ip-range\) 10\.61\.0\.0\/25 needs a Pool \(--subnet\)/,
    ],
    ['IpamDriver.RequestPool', { Pool: '10.61.0.0/24', SubPool: 'x' }, /RequestPool: SubPool is "x"/],
    ['IpamDriver.RequestPool', { Pool: '10.61.0.0/24', V6: 0 }, /V6 must be true or false, got 0/],
    [
      'NetworkDriver.CreateEndpoint',
      { ...ids, Interface: { Address: 'garbage' } },
      /CreateEndpoint: Interface\.Address is "garbage"; expected an address with its prefix length/,
    ],
    [
      'NetworkDriver.CreateEndpoint',
      { ...ids, Interface: { Address: '10.60.0.9' } },
      /Interface\.Address is "10\.60\.0\.9"; expected an address with its prefix length/,
    ],
    ['NetworkDriver.CreateEndpoint', { ...ids, Interface: { AddressIPv6: 'fd00::x/64' } }, /Interface\.AddressIPv6 is "fd00::x\/64"/],
    [
      'NetworkDriver.CreateEndpoint',
      { ...ids, Interface: { Address: '10.60.0.9/24', MacAddress: '02:42' } },
      /Interface\.MacAddress is "02:42"; expected a MAC address/,
    ],
    // Broadcast, multicast (IPv4's 01:00:5e, IPv6's 33:33) and all-zero MACs fail in the kernel at
    // Join, after the endpoint is made: refused here, before anything changes.
    ...['ff:ff:ff:ff:ff:ff', '01:00:5e:00:00:01', '33:33:00:00:00:01', '03:42:0a:01:00:05', '00:00:00:00:00:00'].map(
      (mac): [string, unknown, RegExp] => [
        'NetworkDriver.CreateEndpoint',
        { ...ids, Interface: { Address: '10.60.0.9/24', MacAddress: mac } },
        new RegExp(`Interface\\.MacAddress is "${mac}"; expected a unicast MAC address \\(the first octet even, not all zeros\\)`),
      ],
    ),
    ['NetworkDriver.CreateEndpoint', { ...ids, Interface: 'x' }, /Interface must be an object/],
    ['NetworkDriver.Join', { ...ids, SandboxKey: 5 }, /Join: SandboxKey must be a string, got 5/],
    ['NetworkDriver.Join', { ...ids, Options: [1] }, /Join: Options must be an object/],
    ['NetworkDriver.CreateNetwork', { ...createNetwork(NET), IPv4Data: [{ Pool: 'x' }] }, /IPv4Data\[0\]\.Pool is "x"/],
    [
      'NetworkDriver.CreateNetwork',
      { ...createNetwork(NET), IPv4Data: [{ Pool: '10.62.0.0/24', Gateway: '10.62.0.1' }] },
      /IPv4Data\[0\]\.Gateway is "10\.62\.0\.1"; expected an address with its prefix length/,
    ],
    [
      'NetworkDriver.CreateNetwork',
      { ...createNetwork(NET), IPv4Data: [{ Pool: '10.62.0.0/24', AuxAddresses: { r: 'router' } }] },
      /IPv4Data\[0\]\.AuxAddresses\.r is "router"/,
    ],
    [
      'NetworkDriver.CreateNetwork',
      { ...createNetwork(NET), Options: { 'com.docker.network.generic': { 'ovsnet.tag': { a: 1 } } } },
      /com\.docker\.network\.generic\.ovsnet\.tag must be a string/,
    ],
  ];
  for (const [method, body, err] of cases) {
    const res = await docker(method, body);
    t.equal(res.status, 500, `${method} ${JSON.stringify(body).slice(0, 60)}`);
    t.match(res.body, { Err: err });
  }
  t.equal(await state(), before, 'nothing changed on any refusal');
});

t.test("Fastify's own answers carry Err, and echo a bounded part of the input", async (t) => {
  const notJson = await docker('IpamDriver.RequestPool', `{${'x'.repeat(10_000)}`);
  t.equal(notJson.status, 400);
  t.ok(String(notJson.body.Err).length < 200, 'not-JSON quotes a bounded part');
  const url = await app.inject({ method: 'POST', url: `/${'Q'.repeat(5000)}` });
  t.equal(url.statusCode, 404);
  t.ok(url.json<{ Err: string }>().Err.length < 300, 'an unknown method quotes a bounded part of the URL');
  const badUrl = await app.inject({ method: 'POST', url: '/%E0%A4%A' });
  t.equal(badUrl.statusCode, 400);
  t.match(badUrl.json(), { Err: /the request URL is not valid/ });
  const space = await docker('IpamDriver.RequestPool', { AddressSpace: 'S'.repeat(100_000), Pool: '10.63.0.0/24' });
  t.equal(space.status, 500);
  t.ok(String(space.body.Err).length <= 1100, `an error quoting a field is cut (${String(space.body.Err).length} characters)`);
});

/** Raw bytes to the socket; everything it answers until it closes or `until` matches. */
function raw(socket: string, bytes: string, until?: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = net.connect(socket);
    let got = '';
    c.on('data', (d: Buffer) => {
      got += d.toString();
      if (until?.test(got) === true) c.end();
    });
    c.on('close', () => resolve(got));
    c.on('error', (err: NodeJS.ErrnoException) => (err.code === 'ECONNRESET' ? resolve(got) : reject(err)));
    c.write(bytes);
  });
}

t.test('on the real socket: 431 for huge headers and 503 while closing, with Err', async (t) => {
  const socket = path.join(dir, 'srv.sock');
  let release: () => void = () => undefined;
  const slow = new Promise<void>((r) => (release = r));
  const srv = buildServer({ log: createLogger('silent'), ipam, onActivate: () => slow });
  let entered: () => void = () => undefined;
  const inFlight = new Promise<void>((r) => (entered = r));
  srv.post('/Test.Slow', async () => {
    entered();
    await slow;
    return {};
  });
  await srv.listen({ path: socket });
  const big = await raw(socket, `POST /Plugin.Activate HTTP/1.1\r\nHost: x\r\nX-Big: ${'h'.repeat(20_000)}\r\n\r\n`);
  t.match(big, /^HTTP\/1\.1 431 /);
  t.match(big, /\{"Err":"the request headers are larger than this server accepts/);
  t.ok(big.length < 400, 'the answer quotes none of the headers');
  const garbage = await raw(socket, 'NOT HTTP AT ALL\r\n\r\n');
  t.match(garbage, /^HTTP\/1\.1 400 [\s\S]*\{"Err":"the request is not valid HTTP/);

  // A request in flight keeps its connection open across close(); the next one on it is refused.
  const c = net.connect(socket);
  let got = '';
  c.on('data', (d: Buffer) => (got += d.toString()));
  const closed = new Promise((r) => c.on('close', r));
  c.write('POST /Test.Slow HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n');
  await inFlight;
  const closing = srv.close();
  // close() stops listening once its preClose hooks ran: from then on the server is closing.
  for (let i = 0; i < 500 && srv.server.listening; i++) await new Promise((r) => setTimeout(r, 10));
  c.write('POST /IpamDriver.GetCapabilities HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n');
  await new Promise((r) => setTimeout(r, 100));
  release();
  await closing;
  await Promise.race([closed, new Promise((r) => setTimeout(r, 2000))]);
  c.destroy();
  t.match(
    got,
    /HTTP\/1\.1 200 [\s\S]*HTTP\/1\.1 503 [\s\S]*\{"Err":"ovsnet is stopping/,
    'the in-flight call answered, the next refused with Err',
  );
});
