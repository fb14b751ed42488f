/**
 * A network driver and ovsnet's IPAM on one embedded store, as the daemon wires them (the
 * driver's fakes for OVS and links), with one network on an ovsnet pool, and the store's calls
 * counted: for tests of the calls a container's lifecycle makes.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { NetworkDriver } from '../../src/driver/network-driver.js';
import type { Reservation } from '../../src/ipam-driver/state/records.js';
import { createLogger } from '../../src/lib/log.js';
import { keys } from '../../src/store/keys.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import type { Store } from '../../src/store/types.js';
import type { Ipam } from '../../src/ipam-driver/ipam.js';
import { fakeSideEffects } from './driver-fakes.js';
import { makeIpam, pool } from './ipam.js';

export const NET = 'a'.repeat(64);

/** A network driver of host `test-host` on `store`, its addresses from `ipam`, OVS and links faked. */
export function driverOn(store: Store, ipam: Ipam): NetworkDriver {
  return new NetworkDriver({
    store,
    log: createLogger('silent'),
    ...fakeSideEffects(),
    host: 'test-host',
    bridge: 'br0',
    datapath: () => 'system',
    pools: ipam,
  });
}

/** How the IPAM is wired to the driver: `guard: false` leaves the guard out; `hook` runs as the driver is asked. */
export interface Wiring {
  readonly guard?: boolean;
  readonly hook?: (endpointId: string) => Promise<void>;
}

/**
 * An IPAM and a driver on `store`, wired as daemon/assemble.ts wires them: the IPAM asks the
 * driver's records whether an endpoint's record exists (Docker's release guard). `guard: false`
 * leaves that out (the guard's tests show what happens without it).
 */
export function wired(store: Store, opts: Wiring = {}): { ipam: Ipam; driver: NetworkDriver } {
  const exists = async (id: string, address: string) => {
    await opts.hook?.(id);
    return driver.records.endpointExists(id, address);
  };
  const ipam: Ipam = makeIpam(
    store,
    opts.guard === false
      ? {}
      : { endpointExists: opts.hook === undefined ? (id: string, a: string) => driver.records.endpointExists(id, a) : exists },
  );
  const driver = driverOn(store, ipam);
  return { ipam, driver };
}

/** `poolOptions`: the pool's --ipam-opt (e.g. ovsnet.sticky); `guard: false`: as wired() says. */
export async function driverWithIpam(t: Test, poolOptions: Record<string, string> = {}, opts: Wiring = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-calls-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'state.db');
  const store = new SqliteStore({ file });
  const { ipam, driver } = wired(store, opts);
  t.teardown(async () => {
    await ipam.stop();
    await store.close();
  });
  const calls: string[] = [];
  for (const op of ['get', 'range', 'list', 'txn'] as const) {
    const inner = store[op].bind(store) as (...a: unknown[]) => Promise<unknown>;
    (store as unknown as Record<string, unknown>)[op] = (...a: unknown[]) => (calls.push(op), inner(...a));
  }
  const { poolId } = await ipam.requestPool({ ...pool('10.77.0.0/24'), options: poolOptions });
  const gw = await ipam.requestAddress({ poolId, address: '', gateway: true });
  await driver.createNetwork({ networkId: NET, options: {}, ipv4: [{ pool: '10.77.0.0/24', gateway: gw.address }], ipv6: [] });
  const reservation = async (address: string) =>
    JSON.parse((await store.get(keys.address(poolId, address.split('/')[0] ?? '')))?.value ?? '{}') as Reservation;
  return { store, file, ipam, driver, poolId, calls, reservation };
}

export const ep = (endpointId: string, address: string) => ({ networkId: NET, endpointId, address, addressV6: '', mac: '', portmap: [] });
