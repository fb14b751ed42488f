/**
 * Records no ovsnet writes, put into the store by hand: `etcdctl put
 * /ovsnet/v1/hosts/x nojson`, a pool record with "pool":"bogus", a reservation key naming no
 * address, a count that is not a number, a logical network member that is not JSON or names no
 * network. Each is skipped and noted; the IPAM index still loads and becomes ready, the watch
 * goes on, the host registry follows the other hosts, the logical networks are followed with
 * their good members, and a host joins over its own malformed member key. Run against
 * the embedded store and a real etcd; every key written here is deleted after.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { recordsCheck } from '../../src/cli/doctor/doctor.js';
import { FollowedLogical } from '../../src/driver/records/logical-follow.js';
import { readLogical } from '../../src/driver/records/logical-records.js';
import { joinLogical } from '../../src/driver/vxlan/logical.js';
import { createLogger } from '../../src/lib/log.js';
import { Metrics } from '../../src/metrics.js';
import { skippedRecords } from '../../src/store/decode.js';
import { EtcdStore } from '../../src/store/etcd/etcd.js';
import { HostRegistry } from '../../src/cluster/hosts.js';
import { keys } from '../../src/store/keys.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import { del, put, type Store } from '../../src/store/types.js';
import { makeIpam, pool } from '../helpers/ipam.js';
import { etcdEndpoints } from '../helpers/services.js';
import { waitFor } from '../helpers/wait.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-hostile-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
const log = createLogger('silent');

const logicalRecord = (name: string) => ({
  name,
  encap: 'vxlan',
  vni: 16_000_000,
  subnets: ['10.254.0.0/24'],
  internal: false,
  createdBy: 'good',
  createdAt: 'then',
});

/** Hostile keys, unique to this run (the etcd is shared by the run's other test files). */
function hostile(run: string) {
  const goodPool = JSON.stringify({
    poolId: `${run}-fine`,
    addressSpace: 'LocalDefault',
    pool: '10.251.0.0/24',
    v6: false,
    dynamic: false,
    options: {},
    host: 'h',
    createdAt: '2026-01-01T00:00:00Z',
  });
  return {
    host: [keys.host(`${run}-x`), 'nojson'] as const,
    pool: [keys.pool(`${run}-bogus`), JSON.stringify({ ...JSON.parse(goodPool), poolId: `${run}-bogus`, pool: 'bogus' })] as const,
    // A real pool whose reservation key and count are garbage.
    fine: [keys.pool(`${run}-fine`), goodPool] as const,
    address: [`${keys.addresses(`${run}-fine`)}garbage`, '{}'] as const,
    count: [keys.poolCount(`${run}-fine`), 'many'] as const,
    later: [keys.pool(`${run}-later`), '{"poolId":7}'] as const,
    laterHost: [keys.host(`${run}-y`), '[1,2]'] as const,
    logical: [keys.logicalNetwork(`${run}-net`), JSON.stringify(logicalRecord(`${run}-net`))] as const,
    memberGood: [keys.logicalMember(`${run}-net`, 'good'), '{"networkId":"n1","since":"then"}'] as const,
    memberBad: [keys.logicalMember(`${run}-net`, 'bad'), 'nojson'] as const,
    memberNoId: [keys.logicalMember(`${run}-net`, 'noid'), '{"since":"then"}'] as const,
    // Tombstones (ipam-driver/state/tombstones.ts) not JSON, and naming no time.
    tombBad: [keys.tombstone(`${run}-fine`, '10.251.0.9', 'e1'), 'nojson'] as const,
    tombNoTime: [
      keys.tombstone(`${run}-fine`, '10.251.0.10', 'e2'),
      JSON.stringify({ poolId: `${run}-fine`, address: '10.251.0.10', endpoint: 'e2', host: `${run}-h1`, at: 'yesterday' }),
    ] as const,
  };
}

async function scenario(t: Test, store: Store): Promise<void> {
  const run = randomUUID().slice(0, 8);
  const h = hostile(run);
  const stops: (() => Promise<unknown>)[] = [() => store.txn({ compares: [], success: Object.values(h).map(([k]) => del(k)) })];
  try {
    await steps(t, store, run, h, stops);
  } finally {
    for (const stop of stops.reverse()) await stop();
  }
}

async function steps(t: Test, store: Store, run: string, h: ReturnType<typeof hostile>, stops: (() => Promise<unknown>)[]): Promise<void> {
  const first = [h.host, h.pool, h.fine, h.address, h.count, h.logical, h.memberGood, h.memberBad, h.memberNoId, h.tombBad, h.tombNoTime];
  await store.txn({ compares: [], success: first.map(([k, v]) => put(k, v)) });

  const ipam = makeIpam(store, { host: `${run}-h1` });
  stops.push(() => ipam.stop());
  ipam.start();
  // Requests wait for the index (NOT_READY after 5 s): these answer only if it loaded.
  const { poolId } = await ipam.requestPool(pool('10.252.0.0/24'));
  stops.push(() => ipam.releasePool(poolId));
  const { address } = await ipam.requestAddress({ poolId, address: '', gateway: false });
  t.match(address, /^10\.252\.0\.\d+\/24$/, 'the index loaded without the bad records and IPAM answers');
  t.ok(
    ipam.usage().some((u) => u.pool === '10.251.0.0/24'),
    'the pool whose reservation key and count are garbage is still indexed',
  );
  for (const key of [h.pool[0], h.address[0], h.count[0]]) t.ok(skippedRecords.keys().includes(key), `${key} noted as skipped`);
  // Docker's release reads this host's tombstones first: the bad ones are skipped, the release done.
  await ipam.releaseAddress(poolId, address.split('/')[0] ?? '');
  t.equal(await store.get(keys.address(poolId, address.split('/')[0] ?? '')), undefined, 'released past the bad tombstones');
  for (const key of [h.tombBad[0], h.tombNoTime[0]]) t.ok(skippedRecords.keys().includes(key), `${key} noted as skipped`);

  // The watch goes on through a bad record arriving later.
  await store.txn({ compares: [], success: [put(...h.later)] });
  const second = await ipam.requestPool(pool('10.253.0.0/24'));
  stops.push(() => ipam.releasePool(second.poolId));
  await waitFor(() => skippedRecords.keys().includes(h.later[0]), 5000, 'the later bad pool record, from the watch');
  t.ok(second.poolId, 'IPAM still answers after the watch delivered a bad record');

  // The host registry: the bad host records are skipped, the good peers followed.
  const reg = (name: string) =>
    new HostRegistry({ store, log, self: { name: `${run}-${name}`, vtepIp: '192.0.2.1', machineId: `m-${name}` }, ttlSeconds: 5 });
  const a = reg('a');
  const b = reg('b');
  stops.push(
    () => a.stop(true),
    () => b.stop(true),
  );
  await a.start();
  await store.txn({ compares: [], success: [put(...h.laterHost)] });
  await b.start();
  await waitFor(() => a.hosts().has(`${run}-b`), 5000, 'host a following host b');
  t.notOk(a.hosts().has(`${run}-x`), 'the host record that is not JSON is not a host');
  t.notOk(a.hosts().has(`${run}-y`), 'the host record that is not an object is not a host');
  t.ok(skippedRecords.keys().includes(h.host[0]), 'the bad host record noted');
  t.ok((skippedRecords.byFamily.get('pools') ?? 0) >= 2, 'counted by family');
  t.match(await new Metrics().registry.metrics(), /ovsnet_store_records_invalid_total\{family="pools"\} [1-9]/, 'in the metrics');

  // ovsnet doctor names every bad key, with the fix.
  const check = await recordsCheck(store);
  t.equal(check.ok, false);
  for (const [key] of [h.host, h.pool, h.count, h.later, h.laterHost, h.tombBad, h.tombNoTime])
    t.ok(check.detail.includes(key), `doctor names ${key}`);
  t.match(check.detail, /\(its pool is "bogus", not a CIDR such as 10\.1\.0\.0\/24 or fd00::\/64\)/);
  t.match(check.detail, /hosts\/[0-9a-f]{8}-x \(not JSON: "nojson"\)/);
  t.match(check.fix, /delete or rewrite each key named/);
  for (const [key] of [h.memberBad, h.memberNoId]) t.ok(check.detail.includes(key), `doctor names the member ${key}`);
  t.match(check.detail, /logical-members\/[0-9a-f]{8}-net\/noid \(its networkId is absent, not a string\)/);

  await logicalSteps(t, store, `${run}-net`, h, stops);
}

/** The logical networks: the bad members skipped by followers and readers; a join replaces one. */
async function logicalSteps(t: Test, store: Store, name: string, h: ReturnType<typeof hostile>, stops: (() => Promise<unknown>)[]) {
  const followed = new FollowedLogical(store, log, () => undefined);
  stops.push(() => followed.stop());
  await followed.start();
  t.same(Object.keys(followed.records.get(name)?.members ?? {}), ['good'], 'followed with its good member only');
  for (const [key] of [h.memberBad, h.memberNoId]) t.ok(skippedRecords.keys().includes(key), `${key} noted as skipped`);
  t.ok((skippedRecords.byFamily.get('logical network members') ?? 0) >= 2, 'counted by family');
  const req = { name, vni: undefined, subnets: ['10.254.0.0/24'], internal: false, networkId: 'n2', now: new Date() };
  await joinLogical(store, { ...req, host: 'bad' });
  t.same(
    Object.keys((await readLogical(store, name))?.record.members ?? {}).sort(),
    ['bad', 'good'],
    'a host joins over its malformed key',
  );
  await waitFor(() => followed.records.get(name)?.members.bad?.networkId === 'n2', 5000, 'followers see it');
}

t.test('embedded store: hostile records are skipped, IPAM ready, hosts followed', async (t) => {
  const store = new SqliteStore({ file: path.join(dir, 'hostile.db'), pollMs: 5 });
  t.teardown(() => store.close());
  await scenario(t, store);
});

t.test('etcd: hostile records are skipped, IPAM ready, hosts followed', async (t) => {
  const store = new EtcdStore({ endpoints: etcdEndpoints().map((e) => `http://${e}`), timeoutMs: 3000 });
  t.teardown(() => store.close());
  await scenario(t, store);
});
