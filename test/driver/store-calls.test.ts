/**
 * Store round trips of a container's calls with ovsnet's IPAM: RequestAddress one
 * transaction; CreateEndpoint writes the record and binds the reservation in one; Join,
 * EndpointOperInfo and Leave make no store call; DeleteEndpoint one; ReleaseAddress one. A reservation changed since the IPAM wrote it
 * is bound the usual way, never overwritten.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { NetworkDriver } from '../../src/driver/network-driver.js';
import type { Reservation } from '../../src/ipam-driver/state/records.js';
import { createLogger } from '../../src/lib/log.js';
import { keys } from '../../src/store/keys.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import { put } from '../../src/store/types.js';
import { fakeSideEffects } from '../helpers/driver-fakes.js';
import { makeIpam, pool } from '../helpers/ipam.js';

const NET = 'a'.repeat(64);

async function setup(t: Test) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-calls-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const store = new SqliteStore({ file: path.join(dir, 'state.db') });
  const ipam = makeIpam(store);
  t.teardown(async () => {
    await ipam.stop();
    await store.close();
  });
  const calls: string[] = [];
  for (const op of ['get', 'range', 'list', 'txn'] as const) {
    const inner = store[op].bind(store) as (...a: unknown[]) => Promise<unknown>;
    (store as unknown as Record<string, unknown>)[op] = (...a: unknown[]) => (calls.push(op), inner(...a));
  }
  const driver = new NetworkDriver({
    store,
    log: createLogger('silent'),
    ...fakeSideEffects(),
    host: 'test-host',
    bridge: 'br0',
    datapath: () => 'system',
    pools: ipam,
  });
  const { poolId } = await ipam.requestPool(pool('10.77.0.0/24'));
  const gw = await ipam.requestAddress({ poolId, address: '', gateway: true });
  await driver.createNetwork({ networkId: NET, options: {}, ipv4: [{ pool: '10.77.0.0/24', gateway: gw.address }], ipv6: [] });
  const reservation = async (address: string) =>
    JSON.parse((await store.get(keys.address(poolId, address.split('/')[0] ?? '')))?.value ?? '{}') as Reservation;
  return { store, ipam, driver, poolId, calls, reservation };
}

const ep = (endpointId: string, address: string) => ({ networkId: NET, endpointId, address, addressV6: '', mac: '', portmap: [] });

t.test(
  'a container lifecycle: one transaction each for RequestAddress, CreateEndpoint, DeleteEndpoint and ReleaseAddress, none for Join, EndpointOperInfo, Leave',
  async (t) => {
    const { ipam, driver, poolId, calls, reservation } = await setup(t);
    const E = 'e'.repeat(64);
    const steps: Record<string, string[]> = {};
    const count = async (name: string, f: () => Promise<unknown>) => {
      calls.length = 0;
      await f();
      steps[name] = [...calls];
    };
    let address = '';
    await count('RequestAddress', async () => ({ address } = await ipam.requestAddress({ poolId, address: '', gateway: false })));
    await count('CreateEndpoint', () => driver.createEndpoint(ep(E, address)));
    await count('Join', () => driver.join(NET, E));
    await count('EndpointOperInfo', () => driver.endpointInfo(NET, E));
    await count('Leave', () => driver.leave(NET, E));
    t.equal((await reservation(address)).endpoint, E, 'the reservation names the endpoint');
    await count('DeleteEndpoint', () => driver.deleteEndpoint(NET, E));
    await count('ReleaseAddress', () => ipam.releaseAddress(poolId, address));
    t.same(steps, {
      RequestAddress: ['txn'],
      CreateEndpoint: ['txn'],
      Join: [],
      EndpointOperInfo: [],
      Leave: [],
      DeleteEndpoint: ['txn'],
      ReleaseAddress: ['txn'],
    });
  },
);

t.test('a reservation changed since the IPAM wrote it: bound the usual way, its change kept', async (t) => {
  const { store, ipam, driver, poolId, reservation } = await setup(t);
  const { address } = await ipam.requestAddress({ poolId, address: '', gateway: false });
  const plain = address.split('/')[0] ?? '';
  const changed = { ...(await reservation(address)), name: 'renamed-elsewhere' };
  await store.txn({ compares: [], success: [put(keys.address(poolId, plain), JSON.stringify(changed))] });
  const E = 'f'.repeat(64);
  await driver.createEndpoint(ep(E, address));
  t.match(await reservation(address), { endpoint: E, name: 'renamed-elsewhere' }, 'bound, and the other change is still there');
  t.ok(await store.get(keys.endpoint(NET, E)), 'the endpoint recorded');

  // An address Docker's IPAM gave (no ovsnet reservation): the endpoint is recorded all the same.
  const G = '1'.repeat(64);
  await driver.createEndpoint(ep(G, '10.77.0.250/24'));
  t.ok(await store.get(keys.endpoint(NET, G)));
  t.equal(await store.get(keys.address(poolId, '10.77.0.250')), undefined, 'and no reservation made up');

  // The same CreateEndpoint again (Docker's retry): one record, the reservation still bound.
  await driver.createEndpoint(ep(E, address));
  t.equal((await reservation(address)).endpoint, E);
});

t.test(
  'in a shared pool, ReleaseAddress after a bound CreateEndpoint is one transaction; a reservation changed meanwhile is still released',
  async (t) => {
    const { store, ipam, driver, poolId, calls, reservation } = await setup(t);
    t.equal(await ipam.bindLogical('10.77.0.0/24', 'shared-calls'), poolId, 'the pool is shared (blocks per host)');
    for (const [i, change] of [false, true].entries()) {
      const { address } = await ipam.requestAddress({ poolId, address: '', gateway: false });
      const E = String(i + 2).repeat(64);
      await driver.createEndpoint(ep(E, address));
      await driver.deleteEndpoint(NET, E);
      if (change) {
        const plain = address.split('/')[0] ?? '';
        await store.txn({
          compares: [],
          success: [put(keys.address(poolId, plain), JSON.stringify({ ...(await reservation(address)), name: 'x' }))],
        });
      }
      calls.length = 0;
      await ipam.releaseAddress(poolId, address);
      t.same(
        calls,
        change ? ['txn', 'txn'] : ['txn'],
        change ? 'changed: the compare fails, its answer is read, then released' : 'one transaction, no read',
      );
      t.equal(await store.get(keys.address(poolId, address.split('/')[0] ?? '')), undefined, 'released');
    }
  },
);
