/**
 * One network driver with in-memory OVS, links, NAT and host ports and a real embedded store,
 * for the driver's unit tests; and the Docker requests they send.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { NetworkDriver } from '../../src/driver/network-driver.js';
import { createLogger } from '../../src/lib/log.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import { fakeSideEffects } from './driver-fakes.js';

let n = 0;

export function setup(t: Test, datapath: 'system' | 'netdev' = 'netdev') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `ovsnet-drv-${n++}-`));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const store = new SqliteStore({ file: path.join(dir, 'state.db') });
  t.teardown(() => store.close());
  const fx = fakeSideEffects();
  const driver = new NetworkDriver({ store, log: createLogger('silent'), ...fx, host: 'h1', bridge: 'br0', datapath: () => datapath });
  return { store, ...fx, driver };
}

export const NET = 'a'.repeat(64);
export const NET2 = 'b'.repeat(64);
export const EP = 'c'.repeat(64);
export const net = (id: string, extra: Record<string, unknown> = {}, pool = '10.1.0.0/24') => ({
  networkId: id,
  options: extra,
  ipv4: [{ pool, gateway: pool.replace(/0\/24$/, '1/24') }],
  ipv6: [],
});
export const ep = (mac = '') => ({ networkId: NET, endpointId: EP, address: '10.1.0.5/24', addressV6: '', mac, portmap: [] });
