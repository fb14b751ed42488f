/**
 * DriverRecords.endpointExists, the driver's answer to the IPAM's release guard
 * (endpoint-presence.ts): an endpoint this process created or deleted is known with no store
 * call; any other is read in this host's networks whose subnets hold the address (found there,
 * or not at all: a record of a network whose subnet does not hold it is not looked for, nor
 * another host's). And GoneEndpoints forgets its oldest past its bound.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { DriverRecords } from '../../../src/driver/records/driver-records.js';
import { GoneEndpoints } from '../../../src/driver/records/endpoint-presence.js';
import type { EndpointRecord, NetworkRecord } from '../../../src/driver/model/records.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';

const network = (networkId: string, pool: string, host = 'h1'): NetworkRecord => ({
  networkId,
  host,
  bridge: 'br0',
  tag: 1,
  mtu: 1500,
  internal: false,
  ipv4: [{ pool }],
  ipv6: [],
  createdAt: '2026-12-02T00:00:00Z',
});
const endpoint = (networkId: string, endpointId: string, address: string, host = 'h1'): EndpointRecord => ({
  networkId,
  endpointId,
  host,
  address,
  mac: '',
  hostVeth: 'veth0',
  containerVeth: 'veth1',
  portmap: [],
  createdAt: '2026-12-02T00:00:00Z',
});

t.test('known with no store call when this process wrote or deleted the record; else read where the address belongs', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-presence-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const store = new SqliteStore({ file: path.join(dir, 'state.db') });
  t.teardown(() => store.close());
  const N1 = 'a'.repeat(64);
  const N2 = 'b'.repeat(64);
  const NX = 'c'.repeat(64);
  const writer = new DriverRecords(store, 'h1');
  const peer = new DriverRecords(store, 'h2');
  await writer.createNetwork(network(N1, '10.1.0.0/24'));
  await writer.createNetwork(network(N2, '10.2.0.0/24'));
  await peer.createNetwork(network(NX, '10.1.0.0/24', 'h2'));
  const E1 = '1'.repeat(64);
  const E2 = '2'.repeat(64);
  const E3 = '3'.repeat(64);
  const EX = '4'.repeat(64);
  await writer.createEndpoint(endpoint(N1, E1, '10.1.0.5/24'));
  await writer.createEndpoint(endpoint(N1, E2, '10.1.0.6/24'));
  await writer.createEndpoint(endpoint(N2, E3, '10.1.0.7/24')); // in a network whose subnet does not hold it
  await peer.createEndpoint(endpoint(NX, EX, '10.1.0.8/24', 'h2'));
  await writer.deleteEndpoint(N1, E2);

  const calls: string[] = [];
  for (const op of ['get', 'range', 'list', 'txn'] as const) {
    const inner = store[op].bind(store) as (...a: unknown[]) => Promise<unknown>;
    (store as unknown as Record<string, unknown>)[op] = (...a: unknown[]) => (calls.push(op), inner(...a));
  }
  t.equal(writer.endpointExists(E1, '10.1.0.5'), true, 'created by this process: true at once');
  t.equal(writer.endpointExists(E2, '10.1.0.6'), false, 'deleted by this process: false at once');
  t.same(calls, [], 'no store call for either');

  // A restarted driver knows neither: it reads.
  const fresh = new DriverRecords(store, 'h1');
  t.equal(await fresh.endpointExists(E1, '10.1.0.5'), true, 'read: found in the network whose subnet holds the address');
  t.ok(calls.includes('list') && calls.includes('get'), 'with a list of the network records and a read');
  t.equal(await fresh.endpointExists(E2, '10.1.0.6'), false, 'read: gone');
  t.equal(await fresh.endpointExists(E3, '10.1.0.7'), false, 'not looked for in a network whose subnets do not hold the address');
  t.equal(await fresh.endpointExists(EX, '10.1.0.8'), false, "another host's endpoint is not this host's record");
  calls.length = 0;
  t.equal(fresh.endpointExists(E1, '10.1.0.5'), true, 'found once: kept, no call the next time');
  t.same(calls, []);
});

t.test('GoneEndpoints: bounded, the oldest forgotten first; a record written again is not gone', async (t) => {
  const gone = new GoneEndpoints();
  for (let i = 0; i <= 4096; i++) gone.add(String(i));
  t.notOk(gone.has('0'), 'the oldest forgotten past 4096');
  t.ok(gone.has('1') && gone.has('4096'));
  gone.delete('5');
  t.notOk(gone.has('5'));
});
