/** A CNI service over the daemon's real driver and IPAM (in-memory OVS and links, a real embedded store), the namespace side faked. */
import type { Test } from 'tap';
import { CniService } from '../../src/cni/service.js';
import type { InterfaceSpec, NetnsOps } from '../../src/cni/netns.js';
import { NetworkDriver } from '../../src/driver/network-driver.js';
import { createLogger } from '../../src/lib/log.js';
import { fakeSideEffects } from './driver-fakes.js';
import { makeIpam, pool } from './ipam.js';
import { tempStore } from './temp-store.js';
import { NET, NET2 } from './driver-setup.js';

export const NETNS = '/proc/self/ns/net'; // any existing namespace file: the fake never enters it
export const CID = 'f'.repeat(64);

/** Network NET (Docker name net1) numbered by ovsnet's IPAM from 10.1.0.0/24; NET2 by Docker's own IPAM. */
export async function cniSetup(t: Test) {
  const store = tempStore(t);
  const ipam = makeIpam(store, { host: 'h1' });
  ipam.start();
  t.teardown(() => ipam.stop());
  const fx = fakeSideEffects();
  const log = createLogger('silent');
  const driver = new NetworkDriver({ store, log, ...fx, host: 'h1', bridge: 'br0', datapath: () => 'netdev', pools: ipam });
  const { poolId } = await ipam.requestPool(pool('10.1.0.0/24'));
  await driver.createNetwork({ networkId: NET, options: {}, ipv4: [{ pool: '10.1.0.0/24', gateway: '10.1.0.1/24' }], ipv6: [] });
  // A network numbered by Docker's own IPAM: ovsnet has no pool for it.
  await driver.createNetwork({ networkId: NET2, options: {}, ipv4: [{ pool: '10.2.0.0/24', gateway: '10.2.0.1/24' }], ipv6: [] });
  const attached: InterfaceSpec[] = [];
  const netns: NetnsOps & { fail?: Error; problemText?: string } = {
    async open(path) {
      return { path, close: () => undefined };
    },
    async attach(spec) {
      if (netns.fail !== undefined) throw netns.fail;
      attached.push(spec);
    },
    async problem() {
      return netns.problemText;
    },
  };
  const names = new Map([['net1', NET]]);
  const service = new CniService({
    store,
    host: 'h1',
    log,
    driver,
    ipam,
    netns,
    dockerLookup: async (name) => (names.has(name) ? { id: names.get(name) ?? '' } : undefined),
  });
  const used = () => ipam.usage().find((u) => u.poolId === poolId)?.reserved ?? -1;
  return { store, ipam, fx, driver, service, netns, attached, used, poolId };
}
