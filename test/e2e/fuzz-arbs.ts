/**
 * The fuzz suite's generators (fast-check): for every route of the plugin socket, the valid
 * request Docker would send against the baseline state (test/e2e/fuzz.test.ts), mutated field
 * by field (wrong types, missing fields, huge and deep values, hostile IDs and options), and
 * odd bodies (empty, not JSON, arrays, scalars).
 */
import fc from 'fast-check';

/** The state valid requests refer to (built by the test before the run). */
export interface Baseline {
  readonly space: string;
  readonly poolId: string;
  readonly pool: string;
  readonly gateway: string;
  readonly address: string;
  readonly networkId: string;
  readonly endpointId: string;
}

/** A request: the route and its raw body text (undefined: an empty body). */
export interface Req {
  readonly route: string;
  readonly body: string | undefined;
  /** How it was made, for the report of a failure. */
  readonly how: string;
  /** Its kind (route, mutation, field): requests of one kind are accepted or refused alike, mostly. */
  readonly kind: string;
}

const GENERIC = 'com.docker.network.generic';
const PORTMAP = 'com.docker.network.portmap';
const EXPOSED = 'com.docker.network.endpoint.exposedports';

/** Valid bodies per route against the baseline; routes with no body have {}. */
export function validBodies(b: Baseline): Record<string, Record<string, unknown>> {
  const ids = { NetworkID: b.networkId, EndpointID: b.endpointId };
  const ports = {
    [PORTMAP]: [{ Proto: 6, IP: '', Port: 80, HostIP: '', HostPort: 18080, HostPortEnd: 18080 }],
    [EXPOSED]: [{ Proto: 6, Port: 80 }],
  };
  return {
    'Plugin.Activate': {},
    'NetworkDriver.GetCapabilities': {},
    'NetworkDriver.GwAllocCheck': {
      Options: { 'com.docker.network.enable_ipv4': true, 'com.docker.network.internal': true, [GENERIC]: {} },
    },
    'NetworkDriver.CreateNetwork': {
      NetworkID: b.networkId,
      Options: { 'com.docker.network.enable_ipv6': false, [GENERIC]: { 'ovsnet.tag': '42', 'com.docker.network.driver.mtu': '1450' } },
      IPv4Data: [{ AddressSpace: b.space, Pool: b.pool, Gateway: b.gateway, AuxAddresses: {} }],
      IPv6Data: [],
    },
    'NetworkDriver.DeleteNetwork': { NetworkID: b.networkId },
    'NetworkDriver.CreateEndpoint': {
      ...ids,
      Interface: { Address: b.address, AddressIPv6: '', MacAddress: '' },
      Options: { ...ports, 'com.docker.network.endpoint.ifname': 'data0' },
    },
    'NetworkDriver.EndpointOperInfo': ids,
    'NetworkDriver.Join': { ...ids, SandboxKey: '/var/run/docker/netns/0123456789ab', Options: {} },
    'NetworkDriver.Leave': ids,
    'NetworkDriver.DeleteEndpoint': ids,
    'NetworkDriver.ProgramExternalConnectivity': { ...ids, Options: ports },
    'NetworkDriver.RevokeExternalConnectivity': ids,
    'NetworkDriver.AllocateNetwork': { NetworkID: b.networkId, IPv4Data: [], IPv6Data: [], Options: {} },
    'NetworkDriver.FreeNetwork': { NetworkID: b.networkId },
    'NetworkDriver.DiscoverNew': { DiscoveryType: 1, DiscoveryData: {} },
    'NetworkDriver.DiscoverDelete': { DiscoveryType: 1, DiscoveryData: {} },
    'IpamDriver.GetCapabilities': {},
    'IpamDriver.GetDefaultAddressSpaces': {},
    'IpamDriver.RequestPool': { AddressSpace: b.space, Pool: b.pool, SubPool: '', Options: {}, V6: false },
    'IpamDriver.ReleasePool': { PoolID: b.poolId },
    'IpamDriver.RequestAddress': { PoolID: b.poolId, Address: b.address.split('/')[0], Options: {} },
    'IpamDriver.ReleaseAddress': { PoolID: b.poolId, Address: b.address.split('/')[0] },
  };
}

/** A string of `n` characters. */
const huge = (n: number, c = 'a') => c.repeat(n);

function deep(depth: number, kind: 'array' | 'object'): unknown {
  let v: unknown = 'x';
  for (let i = 0; i < depth; i++) v = kind === 'array' ? [v] : { a: v };
  return v;
}

/** IDs a hostile client sends: Docker's form broken in every way the issue names. */
function hostileIds(b: Baseline): fc.Arbitrary<unknown> {
  const hex64 = fc.stringMatching(/^[0-9a-f]{64}$/);
  return fc.oneof(
    fc.constantFrom(
      '+',
      '*',
      '',
      ' ',
      'ovg+',
      '\u0000',
      `${b.networkId.slice(0, 63)}\u0000`,
      'é'.repeat(64),
      '日本'.repeat(32),
      b.networkId.toUpperCase(),
      `${b.networkId} `,
      `../../${b.networkId}`,
      b.networkId.slice(0, 12),
      // Another ID sharing the first 12 characters (interface names are derived from them).
      b.networkId.slice(0, 12) + 'f'.repeat(52),
      b.endpointId.slice(0, 12) + '0'.repeat(52),
      // IDs of another host's records look like any other ID: fresh, never created here.
      'b'.repeat(64),
      '-j ACCEPT',
      'x; rm -rf /',
      'a\nb',
    ),
    hex64,
    fc.string({ maxLength: 80 }),
    fc.string({ unit: 'binary', maxLength: 70 }),
    fc.constant(huge(200 * 1024, 'f')),
  );
}

/** Option keys and values: ovsnet.* and Docker's, with injection-looking strings. */
function hostileOptions(): fc.Arbitrary<unknown> {
  const key = fc.oneof(
    fc.constantFrom(
      'ovsnet.tag',
      'ovsnet.encap',
      'ovsnet.network',
      'ovsnet.block-size',
      'ovsnet.allow-connected',
      'com.docker.network.driver.mtu',
      'com.docker.network.internal',
      'ovsnet.',
      '__proto__',
      'constructor',
    ),
    fc.string({ maxLength: 30 }),
  );
  const value = fc.oneof(
    fc.constantFrom(
      '-j ACCEPT',
      '; reboot',
      '1\n-A INPUT -j ACCEPT',
      '$(id)',
      '`id`',
      '4095',
      '4096',
      '-1',
      '0',
      '1e9',
      'vxlan',
      'gre',
      'true',
      '',
    ),
    fc.string({ maxLength: 40 }),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.constant(huge(70_000)),
  );
  return fc.oneof(
    fc.dictionary(key, value, { maxKeys: 4 }),
    fc.dictionary(key, value, { maxKeys: 4 }).map((d) => ({ [GENERIC]: d })),
    fc.record({ [PORTMAP]: fc.array(portEntry(), { maxLength: 3 }) }),
  );
}

function portEntry(): fc.Arbitrary<unknown> {
  const num = fc.oneof(
    fc.integer({ min: -2, max: 70_000 }),
    fc.constantFrom(0, 1, 22, 65535, 65536, Number.MAX_SAFE_INTEGER, 1.5),
    fc.constantFrom('80', 'true', '22,80', 'NaN', ''),
    fc.boolean(),
  );
  return fc.record(
    {
      Proto: fc.oneof(fc.constantFrom(6, 17, 132, 1, 0, -1), fc.string({ maxLength: 4 })),
      IP: fc.constantFrom('', '10.0.0.1', 'x'),
      Port: num,
      HostIP: fc.constantFrom('', '0.0.0.0', '127.0.0.1', '::', 'localhost', '1.2.3.4,5.6.7.8', '-j ACCEPT', '999.1.1.1'),
      HostPort: num,
      HostPortEnd: num,
    },
    { requiredKeys: [] },
  );
}

/** Any value of the wrong kind, huge or deep. */
function anyValue(): fc.Arbitrary<unknown> {
  return fc.oneof(
    { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
    { weight: 2, arbitrary: fc.constantFrom(null, true, false, 0, -1, 1.5, 1e308, '', [], {}, [[]], { '': '' }) },
    { weight: 2, arbitrary: fc.string({ maxLength: 100 }) },
    { weight: 1, arbitrary: fc.integer({ min: 500, max: 3000 }).map((d) => deep(d, 'array')) },
    { weight: 1, arbitrary: fc.integer({ min: 500, max: 3000 }).map((d) => deep(d, 'object')) },
    { weight: 1, arbitrary: fc.integer({ min: 10_000, max: 1_100_000 }).map((n) => huge(n)) },
    { weight: 1, arbitrary: fc.array(fc.constant('10.199.7.5'), { minLength: 1000, maxLength: 5000 }) },
  );
}

/** Addresses, pools and MACs that parse almost, or not at all. */
function hostileAddress(): fc.Arbitrary<unknown> {
  return fc.oneof(
    fc.constantFrom(
      'garbage',
      '10.199.7.5/33',
      '10.199.7.256',
      '0.0.0.0/0',
      '::/0',
      '127.0.0.0/8',
      '224.0.0.0/4',
      '169.254.0.0/16',
      '64.0.0.0/2',
      'fe80::1%eth0/64',
      '10.199.7.5/24 ',
      '10.199.7.5\n',
      '10.199.8.1/24',
      '10.199.7.0/24; iptables -F',
      '00:11:22:33:44',
      'ff:ff:ff:ff:ff:ff',
      '01:00:5e:00:00:01',
    ),
    fc.ipV4().map((a) => `${a}/${Math.floor(a.length % 33)}`),
    fc.ipV6(),
  );
}

/** How a field is mutated; an extra field is mostly ignored (and accepted), so it is rarer. */
const mutationKind = fc.oneof(
  { weight: 5, arbitrary: fc.constantFrom('drop', 'wrongType', 'id', 'option', 'address') },
  { weight: 1, arbitrary: fc.constant('extra') },
);

/** Replaces (or drops) the value at a path in a copy of `body`. */
function mutated(body: Record<string, unknown>, path: readonly string[], value: unknown, drop: boolean): Record<string, unknown> {
  const copy = structuredClone(body);
  let at: Record<string, unknown> = copy;
  for (const k of path.slice(0, -1)) {
    const next = at[k];
    if (typeof next !== 'object' || next === null) return copy;
    at = next as Record<string, unknown>;
  }
  const last = path[path.length - 1] ?? '';
  if (drop) delete at[last];
  else at[last] = value;
  return copy;
}

/** Every field path of a body (into objects and the first element of arrays). */
function paths(v: unknown, prefix: readonly string[] = []): string[][] {
  if (typeof v !== 'object' || v === null) return [];
  const out: string[][] = [];
  for (const [k, x] of Object.entries(v)) {
    out.push([...prefix, k]);
    out.push(...paths(x, [...prefix, k]));
  }
  return out;
}

const text = (v: unknown) => JSON.stringify(v);

/** One request of the fuzz run. */
export function request(b: Baseline): fc.Arbitrary<Req> {
  const valid = validBodies(b);
  const routes = Object.keys(valid);
  // Plugin.Activate reads no body, and each one accepted costs the test a reconcile's wait and a
  // sample of the host (250 of 6,000 requests took 33 s of a 236 s run): a quarter of the share
  // of a route with a body.
  const route = fc.oneof(...routes.map((r) => ({ weight: r === 'Plugin.Activate' ? 1 : 4, arbitrary: fc.constant(r) })));
  const fieldMutation = route.chain((r) => {
    const body = valid[r] ?? {};
    const ps = paths(body);
    const at = ps.length === 0 ? fc.constant<string[]>(['Extra']) : fc.constantFrom(...ps);
    return fc.tuple(at, mutationKind).chain(([p, kind]) => {
      const value: fc.Arbitrary<unknown> =
        kind === 'id' ? hostileIds(b) : kind === 'option' ? hostileOptions() : kind === 'address' ? hostileAddress() : anyValue();
      return value.map((v) => {
        const m = kind === 'extra' ? { ...body, [p[0] ?? 'Extra']: body[p[0] ?? ''], Unexpected: v } : mutated(body, p, v, kind === 'drop');
        const shownValue = typeof v === 'string' && v.length > 60 ? `<${v.length} chars>` : text(v)?.slice(0, 60);
        return { route: r, body: text(m), how: `${kind} ${p.join('.')} = ${shownValue}`, kind: `${r} ${kind} ${p.join('.')}` };
      });
    });
  });
  const oddBody = fc
    .tuple(
      route,
      fc.oneof(
        fc.constantFrom(undefined, '', ' ', 'null', '[]', '{', '{"NetworkID":', '"x"', '42', 'true', '\u0000', '{}{}', '[{}]', 'NaN'),
        fc.string({ maxLength: 200 }),
        fc.jsonValue({ maxDepth: 2 }).map(text),
        fc.integer({ min: 1000, max: 30_000 }).map((d) => '['.repeat(d) + ']'.repeat(d)),
        fc.integer({ min: 1000, max: 30_000 }).map((d) => '{"a":'.repeat(d) + '1' + '}'.repeat(d)),
      ),
    )
    .map(([r, body]) => ({ route: r, body, how: `odd body ${body === undefined ? '(none)' : text(body.slice(0, 40))}`, kind: `${r} odd` }));
  const unknownRoute = fc
    .oneof(fc.constantFrom('NetworkDriver.Nope', 'Plugin.Activate/..', 'IpamDriver.RequestPool?x=1', '%', '..%2f..'), fc.webSegment())
    .map((r) => ({ route: r, body: '{}', how: 'unknown route', kind: 'unknown' }));
  return fc.oneof({ weight: 12, arbitrary: fieldMutation }, { weight: 3, arbitrary: oddBody }, { weight: 1, arbitrary: unknownRoute });
}
