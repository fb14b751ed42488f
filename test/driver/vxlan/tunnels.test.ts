/**
 * VXLAN tunnels of logical networks: which tunnels a host wants (pure), and when the datapath
 * is refreshed after adding them.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { Tunnels, tunnelName, wantedTunnels } from '../../../src/driver/vxlan/tunnels.js';
import { createLogger } from '../../../src/lib/log.js';
import type { HostRecord } from '../../../src/cluster/hosts.js';
import { waitFor } from '../../helpers/wait.js';
import { cluster, create, id, tunnelPorts } from '../../helpers/logical-hosts.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-logical-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

t.test('wantedTunnels: one per (network, live peer member), never to itself', async (t) => {
  const hosts = new Map<string, HostRecord>([
    ['a', { name: 'a', vtepIp: '10.0.0.1', machineId: 'a', startedAt: '' }],
    ['b', { name: 'b', vtepIp: '10.0.0.2', machineId: 'b', startedAt: '' }],
  ]);
  const logical = new Map([
    [
      'blue',
      {
        name: 'blue',
        encap: 'vxlan' as const,
        vni: 7,
        subnets: [],
        internal: false,
        members: { a: { networkId: 'x', since: '' }, b: { networkId: 'y', since: '' }, c: { networkId: 'z', since: '' } },
        createdBy: 'a',
        createdAt: '',
      },
    ],
  ]);
  const nets = [
    {
      networkId: 'x',
      host: 'a',
      logical: 'blue',
      vni: 7,
      bridge: 'br0',
      tag: 3,
      mtu: 1450,
      internal: false,
      ipv4: [],
      ipv6: [],
      createdAt: '',
    },
  ];
  t.same(
    wantedTunnels('a', nets, logical, hosts),
    [{ name: tunnelName(7, '10.0.0.2'), bridge: 'br0', tag: 3, vni: 7, peer: 'b', remoteIp: '10.0.0.2' }],
    'c is a member but not alive',
  );
});

t.test("tunnelName: the VNI and the peer's address written out, 15 characters, never shared", async (t) => {
  const FORM = /^ovx[0-9a-f]{6}[0-9a-zA-Z]{6}$/;
  t.equal(tunnelName(7, '10.0.0.2'), 'ovx0000070blXcC', '10.0.0.2 is 167,772,162: 0blXcC in base 62');
  t.match(tunnelName(0xffffff, '255.255.255.255'), FORM);
  t.equal(tunnelName(0xffffff, '255.255.255.255'), 'ovxffffff4GFfc3', 'the largest of both fits in 15');
  t.equal(tunnelName(1, '0.0.0.0'), 'ovx000001000000');
  t.equal(tunnelName(1, '0.0.0.62'), 'ovx000001000010', 'base 62');
  t.equal(tunnelName(1, '10.0.0.01'), tunnelName(1, '10.0.0.1'), 'a leading zero OVSNET_VTEP_IP takes: the same address');
  for (const bad of ['', '2001:db8::1', '10.0.0.256', '10.0.0', ' 10.0.0.1', '10.0.0.1\n', '10.0.0.1/24', 'h2'])
    t.equal(tunnelName(7, bad), undefined, `no tunnel name for ${JSON.stringify(bad)}`);
  // Every address of a /16 in two VNIs (131,072 tunnels): no two share a name. A hash of the
  // peer's name (6 hex digits) shared one among 1,000 peers ~3% of the time.
  const seen = new Set<string>();
  for (const vni of [1, 0x10000])
    for (let i = 0; i < 65_536; i++) {
      const name = tunnelName(vni, `10.${200 + (i >> 14)}.${(i >> 8) & 63}.${i & 255}`) ?? '';
      if (!FORM.test(name) || seen.has(name)) t.fail(`${name} malformed or shared`);
      seen.add(name);
    }
  t.equal(seen.size, 131_072);
});

t.test('after adding tunnel ports (never after removing them) the datapath is refreshed, until that succeeds', async (t) => {
  const alive = new Map<string, HostRecord>();
  const calls: string[] = [];
  let failures = 1;
  const [h1, h2] = cluster(t, 2, alive, async (h) => {
    calls.push(`${h.name} with ${tunnelPorts(h).length} tunnel`);
    if (h.name === 'h1' && failures-- > 0) throw new Error('ovs-vswitchd is restarting');
  });
  if (h1 === undefined || h2 === undefined) throw new Error('two hosts');
  await Promise.all([h1, h2].map((h) => h.tunnels.start()));
  await create(h1, id('p'), '10.82.0.0/24', { 'ovsnet.network': 'pink', 'ovsnet.encap': 'vxlan' });
  await h1.tunnels.settled;
  t.same(calls, [], 'no tunnel, nothing to refresh');
  await create(h2, id('q'), '10.82.0.0/24', { 'ovsnet.network': 'pink', 'ovsnet.encap': 'vxlan' });
  await waitFor(() => calls.length === 3, 5000, 'refreshed again after a failure');
  t.same(
    calls.sort(),
    ['h1 with 1 tunnel', 'h1 with 1 tunnel', 'h2 with 1 tunnel'],
    'each host once its port was there; the failed call retried',
  );
  alive.delete('h2');
  h1.tunnels.schedule();
  await waitFor(() => tunnelPorts(h1).length === 0, 3000, 'the tunnel goes with the peer');
  await h1.tunnels.settled;
  t.equal(calls.length, 3, 'a removal refreshes nothing');
});

t.test('a restarted ovsnet takes no tunnel down before the registry has loaded its peers', async (t) => {
  const alive = new Map<string, HostRecord>();
  const [h1, h2] = cluster(t, 2, alive);
  if (h1 === undefined || h2 === undefined) throw new Error('two hosts');
  await Promise.all([h1, h2].map((h) => h.tunnels.start()));
  await create(h1, id('r'), '10.83.0.0/24', { 'ovsnet.network': 'red', 'ovsnet.encap': 'vxlan' });
  await create(h2, id('s'), '10.83.0.0/24', { 'ovsnet.network': 'red', 'ovsnet.encap': 'vxlan' });
  await waitFor(() => tunnelPorts(h1).length === 1, 3000, 'the tunnel to h2');
  await h1.tunnels.stop();
  // h1's ovsnet again: its registry not loaded yet (no peer known), then loaded.
  let loaded = false;
  const restarted = new Tunnels({
    store: h1.store,
    log: createLogger('silent'),
    ovs: h1.ovs,
    self: () => ({ name: 'h1', vtepIp: '192.0.2.1' }),
    hosts: () => (loaded ? alive : new Map()),
    hostsLoaded: () => loaded,
    networks: () => h1.driver.localNetworks(),
  });
  t.teardown(() => restarted.stop());
  await restarted.start();
  restarted.schedule();
  await restarted.settled;
  t.equal(tunnelPorts(h1).length, 1, 'not taken down while no peer is known yet');
  const before = h1.ovs.ports.get(tunnelPorts(h1)[0]?.[0] ?? '');
  loaded = true;
  restarted.schedule();
  await restarted.settled;
  t.equal(h1.ovs.ports.get(tunnelPorts(h1)[0]?.[0] ?? ''), before, 'and left as it is once they are: the same port');
});
