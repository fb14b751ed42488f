/**
 * The tunnels' two syncs (driver/vxlan/tunnels.ts): a peer's registration or member key changes
 * only its tunnels (its OVS calls counted), the result is always what the full sync wants
 * (random joins, leaves, VTEP changes, restarts, events at once), and the full sync mends what
 * the peer syncs cannot see: a port removed behind ovsnet's back, a failed add.
 */
import t, { type Test } from 'tap';
import type { HostRecord } from '../../../src/cluster/hosts.js';
import type { LogicalNetwork, NetworkRecord } from '../../../src/driver/model/records.js';
import { remoteOf, roleOf, tunnelIds } from '../../../src/driver/ovs/external-ids.js';
import { joinLogical, leaveLogical } from '../../../src/driver/vxlan/logical.js';
import { Tunnels, tunnelName, wantedTunnels } from '../../../src/driver/vxlan/tunnels.js';
import { createLogger } from '../../../src/lib/log.js';
import type { Store } from '../../../src/store/types.js';
import { FakeOvs } from '../../helpers/driver-fakes.js';
import { tempStore } from '../../helpers/temp-store.js';
import { waitFor } from '../../helpers/wait.js';

const log = createLogger('silent');
const SELF = 'self';

/** FakeOvs counting the calls the tunnels make. */
class CountingOvs extends FakeOvs {
  calls = { addPort: 0, deletePort: 0, ownPorts: 0 };
  /** Ports added (+name) and deleted (-name), in order. */
  readonly order: string[] = [];
  override addPort(...a: Parameters<FakeOvs['addPort']>): Promise<void> {
    this.calls.addPort++;
    this.order.push(`+${a[1]}`);
    return super.addPort(...a);
  }
  override deletePort(name: string): Promise<boolean> {
    this.calls.deletePort++;
    this.order.push(`-${name}`);
    return super.deletePort(name);
  }
  override ownPorts(): ReturnType<FakeOvs['ownPorts']> {
    this.calls.ownPorts++;
    return super.ownPorts();
  }
  reset(): void {
    this.calls = { addPort: 0, deletePort: 0, ownPorts: 0 };
  }
}

/** This host's networks: blue and red are logical (green is one it is not in). */
const NETS: readonly NetworkRecord[] = [
  ['blue', 7, 3],
  ['red', 8, 4],
].map(([logical, vni, tag]) => ({
  networkId: `${String(logical)}-self`,
  host: SELF,
  logical: String(logical),
  vni: Number(vni),
  bridge: 'br0',
  tag: Number(tag),
  mtu: 1450,
  internal: false,
  ipv4: [],
  ipv6: [],
  createdAt: '',
}));

/** One host's tunnels on a real embedded store; the registry is `hosts`, told as the registry tells. */
class Rig {
  readonly hosts = new Map<string, HostRecord>([[SELF, host(SELF, '192.0.2.1')]]);
  readonly ovs = new CountingOvs();
  /** Members as the test made them: network -> hosts. */
  readonly members = new Map<string, Set<string>>();
  tunnels: Tunnels;

  constructor(
    private readonly t: Test,
    readonly store: Store,
    private readonly fullSyncMs = 3_600_000,
  ) {
    this.tunnels = this.make();
  }

  make(): Tunnels {
    const tunnels = new Tunnels({
      store: this.store,
      log,
      ovs: this.ovs,
      self: () => ({ name: SELF, vtepIp: '192.0.2.1' }),
      hosts: () => this.hosts,
      networks: async () => [...NETS],
      fullSyncMs: this.fullSyncMs,
    });
    this.t.teardown(() => tunnels.stop());
    return tunnels;
  }

  async up(): Promise<void> {
    await this.ovs.ensureBridge('br0', 'system', 'standalone');
    for (const n of NETS) await this.join(SELF, n.logical ?? '');
    await this.tunnels.start();
    this.tunnels.schedule();
    await this.tunnels.settled;
  }

  register(name: string, vtepIp: string): void {
    this.hosts.set(name, host(name, vtepIp));
    this.tunnels.peersChanged([name]);
  }

  deregister(name: string): void {
    this.hosts.delete(name);
    this.tunnels.peersChanged([name]);
  }

  async join(name: string, logical: string): Promise<void> {
    const req = {
      name: logical,
      vni: undefined,
      subnets: [],
      internal: false,
      host: name,
      networkId: `${logical}-${name}`,
      now: new Date(),
    };
    await joinLogical(this.store, req);
    this.members.set(logical, (this.members.get(logical) ?? new Set()).add(name));
  }

  async leave(name: string, logical: string): Promise<void> {
    await leaveLogical(this.store, logical, name, undefined);
    this.members.get(logical)?.delete(name);
  }

  /** What the full sync wants, from the test's own account of members and hosts. */
  wanted(): string[] {
    const logical = new Map<string, LogicalNetwork>();
    for (const [name, hosts] of this.members) {
      const members = Object.fromEntries([...hosts].map((h) => [h, { networkId: `${name}-${h}`, since: '' }]));
      // The VNI is the local network's (NETS): the record's is not read here.
      logical.set(name, { name, encap: 'vxlan', vni: 0, subnets: [], internal: false, members, createdBy: SELF, createdAt: '' });
    }
    // Two peers at one address want one port.
    return [...new Set(wantedTunnels(SELF, NETS, logical, this.hosts).map((w) => `${w.name} ${w.remoteIp} ${w.tag}`))].sort();
  }

  /** The tunnel ports in OVS, as wanted() gives them. */
  have(): string[] {
    return [...this.ovs.ports]
      .filter(([, p]) => roleOf(p) === 'tunnel')
      .map(([name, p]) => `${name} ${remoteOf(p)} ${p.tag}`)
      .sort();
  }

  /** Until OVS holds what the full sync wants and no sync runs. */
  async inLine(what: string): Promise<void> {
    const [have, wanted] = [() => JSON.stringify(this.have()), () => JSON.stringify(this.wanted())];
    await waitFor(() => have() === wanted(), 3000, what).catch(() => {
      throw new Error(`${what}: OVS has ${have()}, the full sync wants ${wanted()}`);
    });
    await this.tunnels.settled;
  }
}

function host(name: string, vtepIp: string): HostRecord {
  return { name, vtepIp, machineId: name, startedAt: '' };
}

t.test("a peer's join, VTEP change and leave touch only its tunnel: no read of OVS's ports", async (t) => {
  const rig = new Rig(t, tempStore(t));
  await rig.up();
  for (let i = 0; i < 30; i++) {
    rig.register(`p${i}`, `10.1.0.${i + 1}`);
    await rig.join(`p${i}`, 'blue');
  }
  await rig.inLine('30 peers meshed');
  t.equal(rig.have().length, 30);
  rig.ovs.reset();

  rig.register('new', '10.2.0.1');
  await rig.join('new', 'blue');
  await rig.inLine("the new peer's tunnel");
  t.same(rig.ovs.calls, { addPort: 1, deletePort: 0, ownPorts: 0 }, 'one port added, nothing else asked of OVS');
  t.equal(rig.tunnels.count, 31);

  rig.ovs.reset();
  rig.register('new', '10.2.0.2');
  await rig.inLine('the tunnel to its new VTEP address');
  t.same(rig.ovs.calls, { addPort: 1, deletePort: 1, ownPorts: 0 }, 'its port replaced');
  t.ok(rig.have().some((p) => p.endsWith(' 10.2.0.2 3')));

  rig.ovs.reset();
  await rig.join('new', 'red');
  await rig.inLine('its tunnel on red');
  t.same(rig.ovs.calls, { addPort: 1, deletePort: 0, ownPorts: 0 }, 'joining a second network: its tunnel there alone');

  rig.ovs.reset();
  await rig.leave('new', 'blue');
  rig.deregister('new');
  await rig.inLine('gone with the peer');
  t.same(rig.ovs.calls, { addPort: 0, deletePort: 2, ownPorts: 0 }, 'its two ports removed, nothing else');
  t.equal(rig.tunnels.count, 30);
});

/** A seeded sequence (mulberry32): a failure names its seed. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 2 ** 32;
  };
}

t.test('random joins, leaves, VTEP changes and restarts, events at once: OVS always holds what the full sync wants', async (t) => {
  for (let seed = 1; seed <= 12; seed++) {
    const rig = new Rig(t, tempStore(t));
    await rig.up();
    const r = random(seed);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)] as T;
    const peers = ['p0', 'p1', 'p2', 'p3', 'p4', 'p5'];
    const done: string[] = [];
    for (let step = 0; step < 15; step++) {
      // 1-4 changes at once, each of another peer: their events arrive while a sync runs and coalesce.
      const some = [...peers].sort(() => r() - 0.5).slice(0, 1 + Math.floor(r() * 4));
      const batch = some.map(async (p) => {
        const net = pick(['blue', 'red', 'green']);
        const what = pick(['register', 'register', 'deregister', 'join', 'join', 'leave', 'restart', 'snapshot']);
        done.push(`${what} ${p} ${net}`);
        switch (what) {
          case 'register':
            return void rig.register(p, `10.3.0.${1 + Math.floor(r() * 3)}`); // a VTEP change when registered
          case 'deregister':
            return void rig.deregister(p);
          case 'join':
            return rig.members.get(net)?.has(p) === true ? undefined : rig.join(p, net);
          case 'leave':
            return rig.leave(p, net);
          case 'snapshot': // the registry's watch lost and read again
            return void rig.tunnels.peersChanged(undefined);
          default: // this host's ovsnet restarted: a new Tunnels finds the ports of the old
            return rig.tunnels.stop().then(async () => {
              rig.tunnels = rig.make();
              await rig.tunnels.start();
            });
        }
      });
      await Promise.all(batch);
      await rig.inLine(`seed ${seed}, after ${done.join('; ')}`);
      const before = { ...rig.ovs.calls };
      rig.tunnels.schedule();
      await rig.tunnels.settled;
      t.same(
        [rig.ovs.calls.addPort - before.addPort, rig.ovs.calls.deletePort - before.deletePort, rig.tunnels.count],
        [0, 0, rig.wanted().length],
        `seed ${seed} step ${step}: a full sync changes nothing`,
      );
    }
    await rig.tunnels.stop();
  }
});

t.test('two peers at one address (one re-registered under a new name) share one port, kept until neither wants it', async (t) => {
  const rig = new Rig(t, tempStore(t));
  await rig.up();
  rig.register('old', '10.6.0.1');
  await rig.join('old', 'blue');
  await rig.inLine("old's tunnel");
  rig.register('new', '10.6.0.1');
  await rig.join('new', 'blue');
  await rig.inLine('the same port for new');
  t.equal(rig.have().length, 1);
  t.equal(rig.tunnels.count, 1);
  rig.ovs.reset();
  await rig.leave('old', 'blue');
  rig.deregister('old');
  await rig.inLine('the port stays: new wants it');
  t.equal(rig.ovs.calls.deletePort, 0, 'not taken down under new');
  t.equal(rig.have().length, 1);
  await rig.leave('new', 'blue');
  rig.deregister('new');
  await rig.inLine('gone with the last peer at the address');
  t.same(rig.have(), []);
  t.equal(rig.tunnels.count, 0);
});

t.test(
  "an earlier version's tunnel ports (named by a hash of the peer's name) are replaced at start, each successor right after",
  async (t) => {
    const rig = new Rig(t, tempStore(t));
    await rig.ovs.ensureBridge('br0', 'system', 'standalone');
    const peers = [
      ['a', '10.7.0.1', 'ovx0000078e2fd5'],
      ['b', '10.7.0.2', 'ovx0000073a1b77'],
    ] as const;
    for (const [peer, ip, old] of peers) {
      rig.hosts.set(peer, host(peer, ip));
      await rig.join(peer, 'blue');
      await rig.ovs.addPort('br0', old, {
        tag: 3,
        type: 'vxlan',
        protected: true,
        options: { remote_ip: ip, key: '7' },
        externalIds: tunnelIds(peer, ip, 7),
      });
    }
    rig.ovs.order.length = 0;
    await rig.up();
    await rig.inLine('renamed');
    const [a, b] = peers.map(([, ip]) => tunnelName(7, ip) ?? '');
    t.same(rig.ovs.order, ['-ovx0000078e2fd5', `+${a ?? ''}`, '-ovx0000073a1b77', `+${b ?? ''}`]);
  },
);

t.test('the periodic full sync puts back a tunnel port removed or changed behind ovsnet’s back', async (t) => {
  const rig = new Rig(t, tempStore(t), 200);
  await rig.up();
  for (const p of ['a', 'b']) {
    rig.register(p, `10.4.0.${p === 'a' ? 1 : 2}`);
    await rig.join(p, 'blue');
  }
  await rig.inLine('two tunnels');
  const [first, second] = [...rig.ovs.ports.keys()].filter((n) => n.startsWith('ovx'));
  if (first === undefined || second === undefined) throw new Error('two tunnel ports');
  rig.ovs.ports.delete(first);
  const changed = rig.ovs.ports.get(second);
  if (changed !== undefined) changed.tag = 99;
  await rig.inLine('both put right by the periodic sync');
  t.equal(rig.ovs.ports.get(second)?.tag, 3);
});

t.test('a failed add is left to the full sync that follows, which makes it', async (t) => {
  const rig = new Rig(t, tempStore(t));
  await rig.up();
  rig.register('a', '10.5.0.1');
  await rig.join('a', 'blue');
  await rig.inLine("a's tunnel");
  rig.ovs.reset();
  rig.ovs.failNext('addPort');
  rig.register('b', '10.5.0.2');
  await rig.join('b', 'blue');
  await rig.inLine("b's tunnel, after the failure");
  t.equal(rig.ovs.calls.addPort, 2, 'the failed add, then the one that worked');
  t.equal(rig.ovs.calls.ownPorts, 1, 'made by a full sync');
});
