/**
 * parseServices under hostile Engine answers, with fast-check: junk of any shape, huge strings,
 * `__proto__` keys, newlines, `;` and OpenFlow syntax (`actions=drop`) in names and addresses.
 * It never throws, and everything it keeps is a dotted IPv4 address inside the network's
 * subnets, a VIP neither its subnet's network nor broadcast address nor a task's address.
 */
import fc from 'fast-check';
import t from 'tap';
import { parseServices } from '../../../src/driver/vip/services.js';

const SUBNETS = ['10.90.0.0/24', '172.30.4.0/30'];
const DOTTED = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROLS = /[\0-\x1f\x7f-\x9f\u2028\u2029]/;
const inSubnets = (ip: string) => {
  const [a, b, c, d] = ip.split('.').map(Number);
  return (a === 10 && b === 90 && c === 0) || (a === 172 && b === 30 && c === 4 && (d ?? 9) <= 3);
};

const hostile = fc.oneof(
  fc.constantFrom(
    '10.90.0.6,actions=drop',
    '10.90.0.6;reboot',
    '10.90.0.6\n',
    '10.90.0.6 ',
    ' 10.90.0.6',
    '010.90.0.6',
    '10.90.0.6/32',
    '10.90.0.0',
    '10.90.0.255',
    '172.30.4.0',
    '172.30.4.3',
    '172.30.4.2',
    '::ffff:10.90.0.6',
    '10.90.0.6\u0000',
    'actions=drop',
    '__proto__',
    'constructor',
    '<nil>',
    '',
    'x\r\nlevel=error forged',
  ),
  fc.string({ maxLength: 20 }),
  fc.string({ minLength: 300, maxLength: 5000 }),
  fc.ipV4(),
  fc.integer({ min: 0, max: 255 }).map((d) => `10.90.0.${d}`),
  fc.integer({ min: 0, max: 3 }).map((d) => `172.30.4.${d}`),
  fc.ipV6(),
);
const junk = fc.oneof(hostile, fc.jsonValue({ maxDepth: 3 }), fc.constant(undefined), fc.constant(null));
const task = fc.oneof(fc.record({ Name: junk, EndpointIP: fc.oneof(hostile, junk) }, { requiredKeys: [] }), junk);
const service = fc.oneof(
  fc.record(
    { VIP: fc.oneof(hostile, junk), Ports: junk, LocalLBIndex: junk, Tasks: fc.oneof(fc.array(task, { maxLength: 8 }), junk) },
    { requiredKeys: [] },
  ),
  junk,
);
const services = fc.oneof(fc.dictionary(fc.oneof(hostile, fc.string()), service, { maxKeys: 8 }), junk);
/** A body as JSON.parse makes it: "__proto__" an own key, as the Engine's answer would be. */
const body = fc.oneof(
  fc
    .record({ Name: junk, Services: services, IPAM: junk }, { requiredKeys: [] })
    .map((b) => JSON.parse(JSON.stringify(b) ?? 'null') as unknown),
  fc.dictionary(hostile, service).map((s) => JSON.parse(`{"Services":${JSON.stringify(s)},"__proto__":{"VIP":"10.90.0.6"}}`) as unknown),
  junk,
);

t.test('hostile bodies: no throw, only valid in-subnet IPv4 addresses kept, reasons on one line', async (t) => {
  let kept = 0;
  fc.assert(
    fc.property(body, (b) => {
      const { services: got, skipped } = parseServices(b, SUBNETS);
      for (const s of got) {
        kept++;
        if (typeof s.service !== 'string' || s.service.length > 255 || CONTROLS.test(s.service)) return false;
        if (!DOTTED.test(s.vip) || !inSubnets(s.vip) || ['10.90.0.0', '10.90.0.255', '172.30.4.0', '172.30.4.3'].includes(s.vip))
          return false;
        if (!s.tasks.every((a) => DOTTED.test(a) && inSubnets(a) && a !== s.vip)) return false;
        if (new Set(s.tasks).size !== s.tasks.length) return false;
      }
      return skipped.every((r) => typeof r === 'string' && r.length < 400 && !CONTROLS.test(r));
    }),
    { numRuns: 3000, seed: 24 },
  );
  t.ok(kept > 0, `${kept} services kept across the runs: the generator reaches valid ones too`);
  t.equal(({} as Record<string, unknown>).VIP, undefined, 'no prototype polluted');
});
