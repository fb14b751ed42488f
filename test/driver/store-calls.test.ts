/**
 * Store round trips of a container's calls with ovsnet's IPAM: RequestAddress one
 * transaction; CreateEndpoint writes the record and binds the reservation in one; Join,
 * EndpointOperInfo and Leave make no store call; DeleteEndpoint deletes the record and frees the
 * address in one (leaving a tombstone); ReleaseAddress none (it consumes the tombstone). A
 * reservation changed since the IPAM wrote it is bound and released the usual way, never
 * overwritten.
 */
import t from 'tap';
import { keys } from '../../src/store/keys.js';
import { put } from '../../src/store/types.js';
import { NET, driverWithIpam, ep } from '../helpers/driver-ipam.js';

t.test(
  'a container lifecycle: one transaction each for RequestAddress, CreateEndpoint and DeleteEndpoint, none for Join, EndpointOperInfo, Leave and ReleaseAddress',
  async (t) => {
    const { store, ipam, driver, poolId, calls, reservation } = await driverWithIpam(t);
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
      ReleaseAddress: [],
    });
    t.equal(await store.get(keys.address(poolId, address.split('/')[0] ?? '')), undefined, 'the address is free');
    t.equal(Number((await store.get(keys.poolCount(poolId)))?.value), 1, 'the count is back to the gateway alone');
  },
);

t.test('a reservation changed since the IPAM wrote it: bound the usual way, its change kept', async (t) => {
  const { store, ipam, driver, poolId, reservation } = await driverWithIpam(t);
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
  'in a shared pool, DeleteEndpoint frees the address in its transaction and ReleaseAddress makes none; a reservation changed meanwhile is released the usual way',
  async (t) => {
    const { store, ipam, driver, poolId, calls, reservation } = await driverWithIpam(t);
    t.equal(await ipam.bindLogical('10.77.0.0/24', 'shared-calls'), poolId, 'the pool is shared (blocks per host)');
    for (const [i, change] of [false, true].entries()) {
      const { address } = await ipam.requestAddress({ poolId, address: '', gateway: false });
      const plain = address.split('/')[0] ?? '';
      const E = String(i + 2).repeat(64);
      await driver.createEndpoint(ep(E, address));
      if (change) {
        await store.txn({
          compares: [],
          success: [put(keys.address(poolId, plain), JSON.stringify({ ...(await reservation(address)), name: 'x' }))],
        });
      }
      calls.length = 0;
      await driver.deleteEndpoint(NET, E);
      t.same(
        calls,
        change ? ['txn', 'txn'] : ['txn'],
        change ? 'changed: the compare fails, the record is deleted alone' : 'one transaction',
      );
      t.equal(
        (await store.get(keys.address(poolId, plain))) === undefined,
        !change,
        change ? 'the address stays held' : 'the address is free',
      );
      calls.length = 0;
      await ipam.releaseAddress(poolId, address);
      t.same(
        calls,
        change ? ['txn', 'txn'] : [],
        change ? "Docker's release: the compare fails, its answer is read, then released" : 'no store call: the tombstone is consumed',
      );
      t.equal(await store.get(keys.address(poolId, plain)), undefined, 'released');
    }
  },
);

t.test('50 containers at once, in a one-host and in a shared pool: still one transaction per call, 3 per lifecycle', async (t) => {
  for (const shared of [false, true]) {
    const { ipam, driver, poolId, calls } = await driverWithIpam(t);
    if (shared) await ipam.bindLogical('10.77.0.0/24', 'burst');
    const n = 50;
    const id = (i: number) => i.toString(16).padStart(64, '0');
    const perCall = async (f: () => Promise<unknown>) => {
      calls.length = 0;
      await f();
      return calls.length / n;
    };
    let addresses: { address: string }[] = [];
    const requests = await perCall(
      async () =>
        (addresses = await Promise.all(Array.from({ length: n }, () => ipam.requestAddress({ poolId, address: '', gateway: false })))),
    );
    t.equal(new Set(addresses.map((a) => a.address)).size, n, 'no address twice');
    const creates = await perCall(() => Promise.all(addresses.map((a, i) => driver.createEndpoint(ep(id(i), a.address)))));
    const stops = await perCall(() =>
      Promise.all(
        addresses.map(async (a, i) => {
          await driver.deleteEndpoint(NET, id(i));
          await ipam.releaseAddress(poolId, a.address);
        }),
      ),
    );
    t.same({ requests, creates, stops }, { requests: 1, creates: 1, stops: 1 }, `${shared ? 'shared' : 'one-host'} pool`);
  }
});
