/**
 * The plugin socket's routes over a network driver with in-memory OVS, links, NAT and host ports,
 * ovsnet's IPAM and a real embedded store, all torn down with the test; `state()` is everything
 * a refused request could have changed (store keys, OVS ports, links, NAT rules, host ports).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { NetworkDriver } from '../../src/driver/network-driver.js';
import { createLogger } from '../../src/lib/log.js';
import { buildServer } from '../../src/plugin-api/server.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import { fakeSideEffects } from './driver-fakes.js';
import { dockerCaller } from './inject.js';
import { makeIpam } from './ipam.js';

export function pluginApp(t: Test, prefix: string) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `ovsnet-${prefix}-`));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const store = new SqliteStore({ file: path.join(dir, 'state.db') });
  const fx = fakeSideEffects();
  const driver = new NetworkDriver({ store, log: createLogger('silent'), ...fx, host: 'h1', bridge: 'br0', datapath: () => 'netdev' });
  const ipam = makeIpam(store);
  const app = buildServer({ log: createLogger('silent'), ipam, driver });
  t.teardown(async () => {
    await app.close();
    await ipam.stop();
    await store.close();
  });
  const state = async (): Promise<string> => {
    const kvs = (await store.list('/')).kvs.map((kv) => `${kv.key}=${kv.value}`);
    const { ovs, links, nat, hostPorts } = fx;
    return JSON.stringify([kvs, [...ovs.ports.keys()], [...links.names], [...nat.networks], [...nat.ports], [...hostPorts.held]]);
  };
  return { dir, app, store, ipam, fx, driver, docker: dockerCaller(app), state };
}
