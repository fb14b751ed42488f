/**
 * The logical network records and their members' keys (records/logical-records.ts,
 * records/logical-follow.ts): what a join writes and what every host then receives, and the
 * upgrade from layout 1, whose records held their members inside.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { FollowedLogical } from '../../../src/driver/records/logical-follow.js';
import { migrateLogical, readLogical } from '../../../src/driver/records/logical-records.js';
import { joinLogical, leaveLogical } from '../../../src/driver/vxlan/logical.js';
import { createLogger } from '../../../src/lib/log.js';
import { keys } from '../../../src/store/keys.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import type { WatchEvent } from '../../../src/store/types.js';
import { waitFor } from '../../helpers/wait.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-logical-records-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
const store = new SqliteStore({ file: path.join(dir, 'state.db') });
t.teardown(() => store.close());
const log = createLogger('silent');

const join = (name: string, host: string) =>
  joinLogical(store, { name, vni: undefined, subnets: ['10.70.0.0/24'], internal: false, host, networkId: `net-${host}`, now: new Date() });

t.test('a member is a small key of its own; a join among many writes only it', async (t) => {
  for (let i = 0; i < 50; i++) await join('big', `host-${i}`);
  const record = await store.get(keys.logicalNetwork('big'));
  t.notOk('members' in (JSON.parse(record?.value ?? '{}') as object), 'the record holds no member');
  const member = await store.get(keys.logicalMember('big', 'host-7'));
  t.match(JSON.parse(member?.value ?? '{}'), { networkId: 'net-host-7', since: String }, 'each member its networkId and since');

  const events: WatchEvent[] = [];
  const from = (await store.revision()) + 1;
  const watchers = await Promise.all(
    [keys.logicalNetworks, keys.allLogicalMembers].map((p) => store.watch(p, from, { onEvents: (e) => events.push(...e) })),
  );
  t.teardown(() => Promise.all(watchers.map((w) => w.close())));
  await join('big', 'host-50');
  await waitFor(() => events.length > 0, 3000, 'the join seen');
  const bytes = events.reduce((s, e) => s + e.kv.key.length + e.kv.value.length, 0);
  t.same(
    events.map((e) => [e.type, e.kv.key]),
    [['put', keys.logicalMember('big', 'host-50')]],
  );
  t.ok(bytes < 200, `the 51st join is ${bytes} bytes to each follower, whatever the number of members`);
  await leaveLogical(store, 'big', 'host-50', undefined);
  await waitFor(() => events.length > 1, 3000, 'the leave seen');
  t.same(
    events.slice(1).map((e) => [e.type, e.kv.key]),
    [['delete', keys.logicalMember('big', 'host-50')]],
    'a leave (not the last): its key deleted, nothing else',
  );
});

t.test('followers see the records with their members put together', async (t) => {
  let changes = 0;
  const followed = new FollowedLogical(store, log, () => changes++);
  await followed.start();
  t.teardown(() => followed.stop());
  t.ok(followed.loaded);
  t.equal(Object.keys(followed.records.get('big')?.members ?? {}).length, 50);
  await join('small', 'a/b'); // a host name that needs escaping in its key
  await waitFor(() => followed.records.get('small')?.members['a/b'] !== undefined, 3000, 'the new network and member');
  await leaveLogical(store, 'small', 'a/b', undefined);
  await waitFor(() => !followed.records.has('small'), 3000, 'gone with its last member');
  t.ok(changes > 2);
});

t.test("layout 1's members, inside the record, are read as members and moved to keys by the upgrade", async (t) => {
  const old = {
    name: 'old',
    encap: 'vxlan',
    vni: 4000,
    subnets: ['10.71.0.0/24'],
    internal: false,
    members: { h1: { networkId: 'n1', since: 'then' }, h2: { networkId: 'n2', since: 'then' } },
    createdBy: 'h1',
    createdAt: 'then',
  };
  await store.txn({
    compares: [],
    success: [
      { type: 'put', key: keys.logicalNetwork('old'), value: JSON.stringify(old) },
      { type: 'put', key: keys.tag('vni', 4000), value: 'old' },
    ],
  });
  t.same(Object.keys((await readLogical(store, 'old'))?.record.members ?? {}), ['h1', 'h2'], 'read as members before the upgrade');
  await migrateLogical(store);
  await migrateLogical(store); // idempotent
  t.notOk('members' in (JSON.parse((await store.get(keys.logicalNetwork('old')))?.value ?? '{}') as object), 'out of the record');
  t.same(
    (await store.list(keys.logicalMembers('old'))).kvs.map((kv) => [kv.key, JSON.parse(kv.value) as unknown]),
    [
      [keys.logicalMember('old', 'h1'), { networkId: 'n1', since: 'then' }],
      [keys.logicalMember('old', 'h2'), { networkId: 'n2', since: 'then' }],
    ],
    'into keys of their own, none lost',
  );

  // A layout-1 daemon still running writes a member into the record after the upgrade: a join
  // or leave of this layout moves it out first, and loses it no more than the upgrade did.
  const again = { ...old, members: { h3: { networkId: 'n3', since: 'then' } } };
  await store.txn({ compares: [], success: [{ type: 'put', key: keys.logicalNetwork('old'), value: JSON.stringify(again) }] });
  t.same(Object.keys((await readLogical(store, 'old'))?.record.members ?? {}).sort(), ['h1', 'h2', 'h3']);
  await leaveLogical(store, 'old', 'h1', undefined);
  t.same(Object.keys((await readLogical(store, 'old'))?.record.members ?? {}).sort(), ['h2', 'h3'], 'h3 kept, as a key');
  for (const h of ['h2', 'h3']) await leaveLogical(store, 'old', h, undefined);
  t.equal(await store.get(keys.logicalNetwork('old')), undefined, 'the last one deletes it');
  t.equal(await store.get(keys.tag('vni', 4000)), undefined, 'and frees its VNI');
});
