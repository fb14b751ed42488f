/**
 * Hosts for the logical-network tests: drivers with in-memory OVS, links, NAT, flows and OpenFlow and
 * their own IPAM, sharing one real embedded store (as hosts share etcd).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { NetworkDriver } from '../../src/driver/network-driver.js';
import type { DriverDeps, UplinkApi } from '../../src/driver/effects/deps.js';
import { Tunnels } from '../../src/driver/vxlan/tunnels.js';
import type { Ipam } from '../../src/ipam-driver/ipam.js';
import { createLogger } from '../../src/lib/log.js';
import type { HostRecord } from '../../src/cluster/hosts.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import type { Store } from '../../src/store/types.js';
import { FakeFlows, FakeHostPorts, FakeLinks, FakeNat, FakeOvs, fakeOpenFlow, type FakeOpenFlow } from './driver-fakes.js';
import { makeIpam, pool } from './ipam.js';

let n = 0;

const log = createLogger('silent');

export interface Host {
  name: string;
  store: Store;
  ovs: FakeOvs;
  flows: FakeFlows;
  /** The bridge's OpenFlow state (what the periodic sync and reconcile program). */
  openflow: FakeOpenFlow;
  ipam: Ipam;
  driver: NetworkDriver;
  tunnels: Tunnels;
}

/**
 * Hosts h1..hN on one store file; `alive` is the registry every host sees; `uplink(i)` host i's
 * uplink, if any; `more(h)` side effects added to host h's driver (QoS's port numbers, say).
 */
export function cluster(
  t: Test,
  count: number,
  alive: Map<string, HostRecord>,
  afterAdding?: (h: Host) => Promise<void>,
  uplink?: (i: number) => UplinkApi | undefined,
  more?: (h: Host) => Partial<DriverDeps>,
): Host[] {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `ovsnet-logical-${n++}-`));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'state.db');
  return Array.from({ length: count }, (_, i) => {
    const name = `h${i + 1}`;
    const store = new SqliteStore({ file });
    const ovs = new FakeOvs();
    const links = new FakeLinks();
    ovs.links = links;
    const flows = new FakeFlows();
    const openflow = fakeOpenFlow(ovs);
    const up = uplink?.(i);
    const ipam = makeIpam(store, { host: name });
    const host: Host = {
      name,
      store,
      ovs,
      flows,
      openflow,
      ipam,
      driver: undefined as unknown as NetworkDriver,
      tunnels: undefined as unknown as Tunnels,
    };
    host.tunnels = new Tunnels({
      store,
      log,
      ovs,
      self: () => ({ name, vtepIp: `192.0.2.${i + 1}` }),
      hosts: () => alive,
      networks: () => host.driver.localNetworks(),
      ...(afterAdding === undefined ? {} : { afterAdding: () => afterAdding(host) }),
    });
    host.driver = new NetworkDriver({
      store,
      log,
      ovs,
      links,
      nat: new FakeNat(),
      hostPorts: new FakeHostPorts(),
      flows,
      openflow,
      host: name,
      bridge: 'br0',
      datapath: () => 'netdev',
      pools: ipam,
      tunnelMtu: () => 1600,
      ...(up === undefined ? {} : { uplink: up }),
      onNetworksChanged: () => host.tunnels.schedule(),
      ...more?.(host),
    });
    alive.set(name, { name, vtepIp: `192.0.2.${i + 1}`, machineId: name, startedAt: '' });
    t.teardown(async () => {
      await host.tunnels.stop();
      await ipam.stop();
      await store.close();
    });
    return host;
  });
}

export const id = (c: string) => c.repeat(64);
export const generic = (o: Record<string, string>) => ({ 'com.docker.network.generic': o });

/** Docker's network create on one host: IPAM pool and gateway, then CreateNetwork. */
export async function create(h: Host, networkId: string, subnet: string, opts: Record<string, string>): Promise<void> {
  const { poolId } = await h.ipam.requestPool(pool(subnet));
  const { address } = await h.ipam.requestAddress({ poolId, address: '', gateway: true });
  try {
    await h.driver.createNetwork({ networkId, options: generic(opts), ipv4: [{ pool: subnet, gateway: address }], ipv6: [] });
  } catch (err) {
    await h.ipam.releaseAddress(poolId, address.split('/')[0] ?? '');
    await h.ipam.releasePool(poolId);
    throw err;
  }
}

export const tunnelPorts = (h: Host) => [...h.ovs.ports].filter(([, p]) => p.externalIds['ovsnet-role'] === 'tunnel');
