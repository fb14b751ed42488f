/** The endpoint record's compact form in the record copy gives back every record exactly, and is small for the common one. */
import fc from 'fast-check';
import t from 'tap';
import { parseCidrAddress } from '../../../src/driver/model/addresses.js';
import { endpointCodec } from '../../../src/driver/records/endpoint-pack.js';
import { endpointRecord } from '../../../src/driver/records/endpoint-record.js';
import type { EndpointRecord } from '../../../src/driver/model/records.js';
import { keys } from '../../../src/store/keys.js';
import { everyEndpointField } from '../../helpers/endpoint-records.js';

const NET = 'ab'.repeat(32);
const EP = 'cd'.repeat(32);
const keyOf = (r: EndpointRecord) => keys.endpoint(r.networkId, r.endpointId);

const common = endpointRecord(
  { endpointId: EP, address: '10.1.0.5/24', addressV6: '', mac: '', portmap: [], options: {} } as never,
  NET,
  'h1',
  new Date('2026-01-02T03:04:05.678Z'),
);

t.test('the common record (CreateEndpoint as Docker sends it) packs to a few dozen characters and back', async (t) => {
  const codec = endpointCodec('h1');
  const packed = codec.pack(keyOf(common), common);
  t.ok(packed.length <= 80, `${packed.length} characters: ${packed}`);
  t.ok(JSON.stringify(common).length > 300, 'where its JSON has hundreds');
  t.same(codec.unpack(keyOf(common), packed), common);
  t.not(codec.unpack(keyOf(common), packed), codec.unpack(keyOf(common), packed), 'a fresh object each time');
});

t.test('every field, and fields that differ from what would be derived, come back as they were', async (t) => {
  const codec = endpointCodec('h1');
  const every: EndpointRecord = {
    ...everyEndpointField,
    endpointId: EP,
    host: 'h2',
    mac: '02:42:aa:bb:cc:dd',
    hostVeth: 'ovhcdcdcdcd1',
    containerVeth: 'ovccdcdcdcd1',
    createdAt: 'Tue, 02 Jan 2026 03:04:05 GMT',
  };
  t.same(codec.unpack(keyOf(every), codec.pack(keyOf(every), every)), every);
  const { host: _host, ...older } = common; // written before records kept the host
  t.same(codec.unpack(keyOf(common), codec.pack(keyOf(common), older)), older, 'an absent host stays absent');
  const { address: _address, ...noV4 } = common;
  const v6only: EndpointRecord = { ...noV4, addressV6: 'fd00::9/64', mac: '02:11:22:33:44:55' };
  t.same(codec.unpack(keyOf(v6only), codec.pack(keyOf(v6only), v6only)), v6only, 'no IPv4 address: the MAC kept');
  const swarmKey = keys.endpoint(`${'z'.repeat(25)}.h1`, EP);
  t.same(codec.unpack(swarmKey, codec.pack(swarmKey, common)), common, "a swarm network's key (ID and host)");
  const otherKey = keys.endpoint(NET, 'ef'.repeat(32));
  t.same(codec.unpack(otherKey, codec.pack(otherKey, common)), common, 'an endpoint ID that is not its key part');
});

t.test('a record with a field the compact form does not know, or odd values, is kept whole', async (t) => {
  const codec = endpointCodec('h1');
  const newer = { ...common, future: { x: 1 } } as unknown as EndpointRecord;
  const packed = codec.pack(keyOf(newer), newer);
  t.match(packed, /^\{/, 'its JSON text');
  t.same(codec.unpack(keyOf(newer), packed), newer);
  const odd = { ...common, ifname: null, mac: 0 } as unknown as EndpointRecord;
  t.same(codec.unpack(keyOf(odd), codec.pack(keyOf(odd), odd)), odd);
});

t.test('any record round-trips (property)', async (t) => {
  const str = fc.string({ maxLength: 20 });
  const port = fc.record({
    proto: fc.constantFrom('tcp' as const, 'udp' as const, 'sctp' as const),
    containerPort: fc.nat(65535),
    hostIp: str,
    hostPort: fc.nat(65535),
    hostPortEnd: fc.nat(65535),
  });
  const record = fc.record(
    {
      networkId: fc.constantFrom(NET, 'ef'.repeat(32)),
      endpointId: fc.constantFrom(EP, 'x/y%z'),
      host: fc.constantFrom('h1', 'h2'),
      address: fc.constantFrom('10.1.0.5/24', '', 'nonsense', '10.9.9.9/8'),
      addressV6: fc.constantFrom('fd00::1/64', ''),
      mac: fc.oneof(fc.constantFrom('02:42:0a:01:00:05', '02:42:0a:09:09:09'), str),
      hostVeth: fc.oneof(fc.constant(`ovh${EP.slice(0, 10)}`), str),
      containerVeth: fc.oneof(fc.constant(`ovc${EP.slice(0, 10)}`), str),
      ifname: str,
      portmap: fc.array(port, { maxLength: 2 }),
      published: fc.array(port, { maxLength: 2 }),
      qos: fc.record({ rateKbps: fc.nat(), dscp: fc.nat(63) }, { requiredKeys: [] }),
      createdAt: fc.oneof(
        fc.constant(new Date(0).toISOString()),
        fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
        str,
      ),
    },
    { requiredKeys: ['networkId', 'endpointId', 'mac', 'hostVeth', 'containerVeth', 'portmap', 'createdAt'] },
  );
  fc.assert(
    fc.property(record, fc.boolean(), (r, ownKey) => {
      const codec = endpointCodec('h1');
      const key = keys.endpoint(r.networkId, ownKey ? r.endpointId : 'other');
      t.same(codec.unpack(key, codec.pack(key, r)), r);
    }),
    { numRuns: 1000 },
  );
});

t.test("a record whose address or gateway changes is parsed anew: the new text's bytes and MAC", async (t) => {
  t.same([...parseCidrAddress('10.67.0.1/24', 'Gateway').bytes], [10, 67, 0, 1]);
  t.same([...parseCidrAddress('10.67.1.1/24', 'Gateway').bytes], [10, 67, 1, 1], 'the gateway moved: its new bytes');
  const codec = endpointCodec('h1');
  const key = keys.endpoint('a'.repeat(64), 'b'.repeat(64));
  const record = (address: string) => ({
    networkId: 'a'.repeat(64),
    endpointId: 'b'.repeat(64),
    address,
    mac: `02:42:0a:43:00:${Number(address.split('.')[3]?.split('/')[0]).toString(16).padStart(2, '0')}`,
    host: 'h1',
  });
  for (const address of ['10.67.0.11/24', '10.67.0.12/24', '10.67.0.11/24']) {
    const r = record(address);
    const packed = codec.pack(key, r as never);
    t.notOk(packed.includes('02:42'), 'the MAC is left to be derived');
    t.same(codec.unpack(key, packed), r, `${address}: the MAC derived from this address`);
  }
});
