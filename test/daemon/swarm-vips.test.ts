/**
 * SwarmVips with a fake Engine: the table it gives the flows, a dead node's tasks left out once
 * ovsnet saw that node's host registered and then gone (never a node it never knew), a VIP gone
 * from the Engine's list kept refusing (no task) for the grace and then dropped, a sync on every
 * change, and what the admin endpoint shows.
 */
import t from 'tap';
import { createLogger } from '../../src/lib/log.js';
import type { EngineReader, EnginePath, EventHandlers } from '../../src/driver/vip/engine.js';
import type { NetworkRecord } from '../../src/driver/model/records.js';
import { SwarmVips, VANISHED_GRACE_MS } from '../../src/daemon/swarm-vips.js';

const ID = 'a'.repeat(25);
const network = {
  networkId: ID,
  bridge: 'ovsnet0',
  tag: 5,
  mtu: 1450,
  internal: false,
  ipv4: [{ pool: '10.90.0.0/24' }],
  ipv6: [],
  createdAt: '',
} as NetworkRecord;
const task = (ip: string, node: string) => ({ EndpointIP: ip, Info: { 'Host IP': node } });

class Engine implements EngineReader {
  services: Record<string, unknown> = {};
  get(_p: EnginePath): Promise<unknown> {
    return Promise.resolve({ Services: this.services });
  }
  events(_f: unknown, _h: EventHandlers) {
    return { close: () => undefined };
  }
}

async function settle(cond: () => boolean, ms = 2000): Promise<boolean> {
  const end = Date.now() + ms;
  while (!cond() && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
  return cond();
}

function setup() {
  const engine = new Engine();
  let syncs = 0;
  let live = new Set(['192.168.1.1', '192.168.1.2', '192.168.1.3']);
  let now = 1_000_000;
  const vips = new SwarmVips({
    log: createLogger('silent'),
    socket: '/nonexistent/docker.sock',
    engine,
    pollMs: 20,
    networks: () => Promise.resolve([network]),
    syncFlows: () => {
      syncs++;
      return Promise.resolve();
    },
    liveVteps: () => live,
    now: () => now,
  });
  return {
    engine,
    vips,
    syncs: () => syncs,
    setLive: (l: string[]) => (live = new Set(l)),
    advance: (ms: number) => (now += ms),
  };
}

t.test("the Engine's VIPs, synced at once; a dead node's tasks leave, an unknown node's stay", async (t) => {
  const s = setup();
  s.engine.services = {
    web: { VIP: '10.90.0.6', Tasks: [task('10.90.0.7', '192.168.1.1'), task('10.90.0.8', '192.168.1.3'), task('10.90.0.9', '172.16.0.9')] },
  };
  s.vips.start();
  t.teardown(() => s.vips.stop());
  t.ok(await settle(() => (s.vips.vips().get(ID)?.length ?? 0) === 1), 'read');
  t.ok(s.syncs() >= 1, 'the flows synced');
  t.same(s.vips.vips().get(ID)?.[0]?.tasks, ['10.90.0.7', '10.90.0.8', '10.90.0.9']);
  s.setLive(['192.168.1.1', '192.168.1.2']);
  t.same(
    s.vips.vips().get(ID)?.[0]?.tasks,
    ['10.90.0.7', '10.90.0.9'],
    "node 192.168.1.3 was a live host's and is gone: its task leaves; 172.16.0.9 was never ovsnet's: kept",
  );
  const before = s.syncs();
  s.vips.hostsChanged();
  t.ok(s.syncs() > before, 'a host change syncs the flows');
  t.same(s.vips.info().networks[ID]?.[0]?.tasks, ['10.90.0.7', '10.90.0.9'], 'the admin endpoint shows what is programmed');
});

t.test('a VIP gone from the list refuses (no task) for the grace, then goes', async (t) => {
  const s = setup();
  s.engine.services = { web: { VIP: '10.90.0.6', Tasks: [task('10.90.0.7', '192.168.1.1')] } };
  s.vips.start();
  t.teardown(() => s.vips.stop());
  t.ok(await settle(() => (s.vips.vips().get(ID)?.length ?? 0) === 1));
  s.engine.services = {};
  t.ok(await settle(() => s.vips.vips().get(ID)?.[0]?.tasks.length === 0), 'scaled to 0: still there, with no task');
  t.equal(s.vips.vips().get(ID)?.[0]?.vip, '10.90.0.6');
  s.advance(VANISHED_GRACE_MS + 1);
  t.ok(await settle(() => s.vips.vips().get(ID)?.length === 0, VANISHED_GRACE_MS + 2000), 'after the grace: gone');
  s.engine.services = { web: { VIP: '10.90.0.6', Tasks: [task('10.90.0.7', '192.168.1.1')] } };
  t.ok(await settle(() => s.vips.vips().get(ID)?.[0]?.tasks.length === 1), 'back with its task');
});

t.test('OVSNET_DOCKER_HOST=off: nothing followed, no VIP, the admin endpoint says so', async (t) => {
  const vips = new SwarmVips({
    log: createLogger('silent'),
    socket: '',
    networks: () => Promise.resolve([network]),
    syncFlows: () => Promise.resolve(),
    liveVteps: () => new Set(),
  });
  vips.start();
  t.same([...vips.vips()], []);
  t.same(vips.info(), { reachable: false, socket: '', networks: {} });
  vips.stop();
});
