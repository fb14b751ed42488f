/**
 * VipFollower with a fake Engine: reads coalesced and never overlapping, onChange only on a
 * change, the last good entry kept through a failed read, a 404 as no services, a network gone
 * from ovsnet's list dropped, reachability logged once per change, stop() idempotent; and
 * describeEngine's warning.
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import t, { type Test } from 'tap';
import { EngineError, type EngineReader, type EnginePath, type EventHandlers } from '../../../src/driver/vip/engine.js';
import { describeEngine, VipFollower, type VipNetwork, type VipTable } from '../../../src/driver/vip/follower.js';
import { createLogger } from '../../../src/lib/log.js';

const alive = setInterval(() => undefined, 1000);
t.teardown(() => clearInterval(alive));

const A = 'a'.repeat(25);
const B = 'b'.repeat(25);
const SUB = ['10.90.0.0/24'];
const svc = (vip: string, ...tasks: string[]) => ({ VIP: vip, Tasks: tasks.map((ip) => ({ EndpointIP: ip })) });

class FakeEngine implements EngineReader {
  answers = new Map<string, () => unknown>();
  gets = 0;
  inFlight = 0;
  maxInFlight = 0;
  handlers: EventHandlers | undefined;
  closed = 0;
  delayMs = 0;
  async get(p: EnginePath): Promise<unknown> {
    this.gets++;
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      await new Promise((r) => setTimeout(r, this.delayMs));
      const id = /^\/networks\/(\w+)\?verbose=true$/.exec(p)?.[1] ?? '';
      const answer = this.answers.get(id);
      if (answer === undefined) throw new EngineError(`GET ${p}: the Engine answered status 404`, { status: 404 });
      return answer();
    } finally {
      this.inFlight--;
    }
  }
  events(_filters: unknown, handlers: EventHandlers) {
    this.handlers = handlers;
    return { close: () => void this.closed++ };
  }
}

function setup(t: Test, nets: VipNetwork[] = [{ networkId: A, subnets: SUB }]) {
  const engine = new FakeEngine();
  const tables: VipTable[] = [];
  const lines: Record<string, unknown>[] = [];
  const dest = new Writable({ write: (c: Buffer, _e, cb) => (lines.push(JSON.parse(c.toString()) as Record<string, unknown>), cb()) });
  const state = { nets };
  const follower = new VipFollower({
    engine,
    networks: () => Promise.resolve(state.nets),
    onChange: (table) => tables.push(table),
    log: createLogger('debug', dest),
    pollMs: 60_000,
  });
  t.teardown(() => follower.stop());
  return { engine, tables, lines, state, follower };
}

t.test('the first read gives the table; the same answer again calls nobody', async (t) => {
  const { engine, tables, follower } = setup(t);
  engine.answers.set(A, () => ({ Services: { web: svc('10.90.0.6', '10.90.0.8', '10.90.0.7'), dns: svc('<nil>', '10.90.0.9') } }));
  await follower.refresh();
  t.same([...(tables[0] ?? [])], [[A, [{ service: 'web', vip: '10.90.0.6', tasks: ['10.90.0.7', '10.90.0.8'] }]]]);
  await follower.refresh();
  await follower.refresh();
  t.equal(tables.length, 1, 'no change, no call');
  engine.answers.set(A, () => ({ Services: { web: svc('10.90.0.6', '10.90.0.7') } }));
  await follower.refresh();
  t.equal(tables.length, 2);
  t.match(follower.status(), { reachable: true, networks: 1, services: 1 });
  t.ok(follower.status().updatedAt instanceof Date);
});

t.test('reads never overlap; requests during a read coalesce into one more', async (t) => {
  const { engine, follower } = setup(t, [
    { networkId: A, subnets: SUB },
    { networkId: B, subnets: SUB },
  ]);
  engine.delayMs = 20;
  engine.answers.set(A, () => ({ Services: {} }));
  const all = [follower.refresh(), follower.refresh()];
  await new Promise((r) => setTimeout(r, 5));
  for (let i = 0; i < 10; i++) all.push(follower.refresh());
  await Promise.all(all);
  t.equal(engine.maxInFlight, 1, 'one GET at a time');
  t.equal(engine.gets, 4, 'two reads of two networks: the first, and one for all the requests during it');
});

t.test('start: reads now, on events and on (re)connect; stop() is idempotent and closes the stream', async (t) => {
  const { engine, tables, follower } = setup(t);
  engine.answers.set(A, () => ({ Services: { web: svc('10.90.0.6') } }));
  follower.start();
  follower.start();
  await follower.refresh();
  t.equal(tables.length, 1);
  engine.answers.set(A, () => ({ Services: { web: svc('10.90.0.6', '10.90.0.7') } }));
  const before = engine.gets;
  engine.handlers?.onEvent({ Type: 'container', Action: 'start' });
  await follower.refresh();
  t.ok(engine.gets > before, 'an event reads again');
  t.equal(tables.length, 2);
  follower.stop();
  follower.stop();
  t.equal(engine.closed, 1, 'the events stream closed once');
  const after = engine.gets;
  await follower.refresh();
  t.equal(engine.gets, after, 'nothing read after stop()');
});

t.test('polls at pollMs', async (t) => {
  const engine = new FakeEngine();
  engine.answers.set(A, () => ({ Services: {} }));
  const follower = new VipFollower({
    engine,
    networks: () => Promise.resolve([{ networkId: A, subnets: SUB }]),
    onChange: () => undefined,
    log: createLogger('silent'),
    pollMs: 20,
  });
  follower.start();
  await new Promise((r) => setTimeout(r, 150));
  follower.stop();
  t.ok(engine.gets >= 4, `${engine.gets} reads in 150 ms`);
});

t.test('a failed read keeps the last good entry, logged once; back, logged once', async (t) => {
  const { engine, tables, lines, follower } = setup(t);
  engine.answers.set(A, () => ({ Services: { web: svc('10.90.0.6', '10.90.0.7') } }));
  await follower.refresh();
  engine.answers.set(A, () => {
    throw new EngineError('GET x: no whole answer within 3000 ms');
  });
  for (let i = 0; i < 5; i++) await follower.refresh();
  t.equal(tables.length, 1, 'the table stands');
  t.match(follower.status(), { reachable: false, lastError: /no whole answer/, services: 1 });
  t.equal(lines.filter((l) => l.level === 'warn').length, 1, 'one warning for five failures');
  engine.answers.set(A, () => ({ Services: { web: svc('10.90.0.6', '10.90.0.7') } }));
  await follower.refresh();
  await follower.refresh();
  t.equal(lines.filter((l) => /answers again/.test(String(l.msg))).length, 1, 'one line when back');
  t.equal(follower.status().reachable, true);
  engine.answers.set(A, () => 'garbage');
  await follower.refresh();
  t.same([...(tables.at(-1) ?? [])], [[A, []]], 'an answer of another shape is an answer: no services (skipped, logged)');
  t.equal(lines.filter((l) => /swarm services skipped/.test(String(l.msg))).length, 1);
  await follower.refresh();
  t.equal(lines.filter((l) => /swarm services skipped/.test(String(l.msg))).length, 1, 'the same skips are not logged again');
});

t.test('a 404 is no services; a network gone from the list is dropped', async (t) => {
  const { engine, tables, state, follower } = setup(t, [
    { networkId: A, subnets: SUB },
    { networkId: B, subnets: SUB },
  ]);
  engine.answers.set(A, () => ({ Services: { web: svc('10.90.0.6') } }));
  engine.answers.set(B, () => ({ Services: { api: svc('10.90.0.2') } }));
  await follower.refresh();
  t.same(
    [...(tables.at(-1) ?? [])].map(([id, s]) => [id, s.length]),
    [
      [A, 1],
      [B, 1],
    ],
  );
  engine.answers.delete(B);
  await follower.refresh();
  t.same(tables.at(-1)?.get(B), [], '404: none');
  t.equal(follower.status().reachable, true, 'a 404 is an answer');
  state.nets = [{ networkId: A, subnets: SUB }];
  await follower.refresh();
  t.same([...(tables.at(-1)?.keys() ?? [])], [A]);
});

t.test("subnets: ovsnet's own, else the Engine's IPAM", async (t) => {
  const { engine, tables, follower } = setup(t, [{ networkId: A, subnets: [] }]);
  engine.answers.set(A, () => ({ IPAM: { Config: [{ Subnet: '10.5.0.0/24' }] }, Services: { web: svc('10.5.0.6'), x: svc('10.90.0.6') } }));
  await follower.refresh();
  t.same(tables.at(-1)?.get(A), [{ service: 'web', vip: '10.5.0.6', tasks: [] }]);
});

t.test('describeEngine: a socket is fine, anything else says what breaks and how to fix it', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-describe-'));
  const sock = path.join(dir, 'd.sock');
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(sock, r));
  t.teardown(() => {
    server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  t.equal(describeEngine(sock), undefined);
  t.equal(describeEngine(''), undefined, 'off: nothing to say');
  fs.writeFileSync(path.join(dir, 'f'), '');
  t.match(
    describeEngine(path.join(dir, 'f')),
    /is not a socket: swarm services' VIPs will not work .*dnsrr services do.*OVSNET_DOCKER_HOST/,
  );
  t.match(describeEngine(path.join(dir, 'none')), /cannot be read \(ENOENT\).*"docker" mount/);
});
