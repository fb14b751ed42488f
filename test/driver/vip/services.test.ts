/**
 * parseServices against the Engine's verbose network view: a real-shaped body, every skip rule
 * (each with its reason), dnsrr services left out without a reason, and the caps.
 */
import t from 'tap';
import { engineSubnets, parseServices, SERVICE_LIMITS } from '../../../src/driver/vip/services.js';

const SUBNETS = ['10.90.0.0/24'];
const task = (ip: unknown, name = 'web.1.abc', node: unknown = undefined) => ({
  Name: name,
  EndpointID: 'e'.repeat(64),
  EndpointIP: ip,
  ...(node === undefined ? {} : { Info: { 'Host IP': node } }),
});
const body = (services: unknown) => ({
  Name: 'front',
  Id: 'a'.repeat(25),
  IPAM: { Config: [{ Subnet: '10.90.0.0/24', Gateway: '10.90.0.1' }] },
  Services: services,
});

t.test('a real-shaped body: services sorted, tasks deduplicated and sorted, dnsrr left out', async (t) => {
  const got = parseServices(
    body({
      web: {
        VIP: '10.90.0.6',
        Ports: ['Target: 80, Publish: 8080'],
        LocalLBIndex: 257,
        Tasks: [task('10.90.0.9'), task('10.90.0.7'), task('10.90.0.9')],
      },
      api: { VIP: '10.90.0.2', Ports: [], LocalLBIndex: 258, Tasks: [] },
      dns: { VIP: '<nil>', Tasks: [task('10.90.0.20')] },
      dns2: { VIP: '', Tasks: [task('10.90.0.21')] },
    }),
    SUBNETS,
  );
  t.same(got.services, [
    { service: 'api', vip: '10.90.0.2', tasks: [] },
    { service: 'web', vip: '10.90.0.6', tasks: ['10.90.0.7', '10.90.0.9'] },
  ]);
  t.same(got.skipped, [], 'a dnsrr service is not a problem');
  t.same(engineSubnets(body({})), ['10.90.0.0/24']);
  t.same(engineSubnets({ IPAM: { Config: 'x' } }), []);
});

t.test("each task's node (Info's Host IP) kept when it is an IPv4 address, left out otherwise", async (t) => {
  const got = parseServices(
    body({
      web: {
        VIP: '10.90.0.6',
        Tasks: [
          task('10.90.0.7', 'a', '192.168.1.2'),
          task('10.90.0.8', 'b', 'evil\nline'),
          task('10.90.0.9', 'c', { x: 1 }),
          task('10.90.0.10'),
        ],
      },
    }),
    SUBNETS,
  );
  t.same(got.services[0]?.nodes, { '10.90.0.7': '192.168.1.2' });
  t.same(got.services[0]?.tasks, ['10.90.0.7', '10.90.0.8', '10.90.0.9', '10.90.0.10'], 'a task without a node is still a task');
});

t.test('a body or Services of another shape: no services, one reason', async (t) => {
  for (const b of [null, 'x', [], 3]) t.same(parseServices(b, SUBNETS), { services: [], skipped: ['the answer is not a JSON object'] });
  t.same(parseServices(body([1]), SUBNETS), { services: [], skipped: ['Services is not an object'] });
  t.same(parseServices(body('web'), SUBNETS), { services: [], skipped: ['Services is not an object'] });
  t.same(parseServices({ Name: 'x' }, SUBNETS), { services: [], skipped: [] }, 'no Services: none');
});

t.test('each skip rule, with its reason', async (t) => {
  const one = (name: string, entry: unknown) => parseServices(body({ [name]: entry }), SUBNETS);
  const cases: [string, unknown, RegExp][] = [
    ['x'.repeat(256), { VIP: '10.90.0.6' }, /not a service name/],
    ['evil\nINFO forged', { VIP: '10.90.0.6' }, /service "evil\\nINFO forged": not a service name/],
    ['bidi\u202e', { VIP: '10.90.0.6' }, /\\u202e/],
    ['', { VIP: '10.90.0.6' }, /not a service name/],
    ['web', 'x', /not an object/],
    ['web', { VIP: 'fd00::6' }, /VIP "fd00::6" is not an IPv4 address/],
    ['web', { VIP: '10.90.0.6/24' }, /is not an IPv4 address/],
    ['web', { VIP: '10.90.0.256' }, /is not an IPv4 address/],
    ['web', { VIP: 6 }, /VIP "6" is not an IPv4 address/],
    ['web', { VIP: '10.91.0.6' }, /VIP "10.91.0.6" is outside the network's subnets/],
    ['web', { VIP: '10.90.0.0' }, /network or broadcast address/],
    ['web', { VIP: '10.90.0.255' }, /network or broadcast address/],
    ['web', { VIP: '10.90.0.6', Tasks: [task('10.90.0.6')] }, /VIP "10.90.0.6" is also a task's address/],
  ];
  for (const [name, entry, reason] of cases) {
    const got = one(name, entry);
    t.same(got.services, [], `${JSON.stringify(name).slice(0, 20)} ${JSON.stringify(entry)}: skipped`);
    t.equal(got.skipped.length, 1);
    t.match(got.skipped[0], reason);
    t.notMatch(got.skipped[0], /[\n\r\u2028\u202e]/, 'one line, no control character');
  }
});

t.test('a bad task is skipped alone; a service with no valid task is kept (its VIP answers with a refusal)', async (t) => {
  const got = parseServices(
    body({
      web: { VIP: '10.90.0.6', Tasks: [task(undefined), task('10.91.0.7'), task('::1'), 'x', task('10.90.0.8'), task('a'.repeat(5000))] },
    }),
    SUBNETS,
  );
  t.same(got.services, [{ service: 'web', vip: '10.90.0.6', tasks: ['10.90.0.8'] }]);
  t.equal(got.skipped.length, 5);
  t.match(got.skipped.join('\n'), /task 1: EndpointIP "10.91.0.7" is outside/);
  t.ok(
    got.skipped.every((s) => s.length < 200),
    'values cut short',
  );
  t.same(parseServices(body({ web: { VIP: '10.90.0.6', Tasks: [task('x')] } }), SUBNETS).services, [
    { service: 'web', vip: '10.90.0.6', tasks: [] },
  ]);
  t.match(parseServices(body({ web: { VIP: '10.90.0.6', Tasks: 'x' } }), SUBNETS).skipped, [/Tasks is not a list/]);
});

t.test('several subnets; IPv6 subnets ignored; a /31 keeps both addresses', async (t) => {
  const got = parseServices(
    body({ a: { VIP: '10.1.0.0', Tasks: [task('10.1.0.1')] }, b: { VIP: '10.90.0.6', Tasks: [task('10.1.0.1')] } }),
    ['10.90.0.0/24', 'fd00::/64', '10.1.0.0/31', 'junk'],
  );
  t.same(got.services, [
    { service: 'a', vip: '10.1.0.0', tasks: ['10.1.0.1'] },
    { service: 'b', vip: '10.90.0.6', tasks: ['10.1.0.1'] },
  ]);
  t.same(
    parseServices(body({ a: { VIP: '10.90.0.6' } }), []).skipped,
    ['service "a": VIP "10.90.0.6" is outside the network\'s subnets'],
    'no subnet: nothing fits',
  );
});

t.test('caps: services and tasks per service', async (t) => {
  const many: Record<string, unknown> = {};
  for (let i = 0; i < SERVICE_LIMITS.services + 3; i++) many[`s${i}`] = { VIP: '10.90.0.6' };
  const got = parseServices(body(many), SUBNETS);
  t.equal(got.services.length, SERVICE_LIMITS.services);
  t.same(got.skipped, [`3 services beyond the first ${SERVICE_LIMITS.services}`]);
  const tasks = Array.from({ length: SERVICE_LIMITS.tasksPerService + 2 }, (_, i) => task(`10.90.${16 + Math.floor(i / 256)}.${i % 256}`));
  const big = parseServices(body({ web: { VIP: '10.90.0.6', Tasks: tasks } }), ['10.90.0.0/16']);
  t.equal(big.services[0]?.tasks.length, SERVICE_LIMITS.tasksPerService);
  t.same(big.skipped, [`service "web": 2 tasks beyond the first ${SERVICE_LIMITS.tasksPerService}`]);
});
