/**
 * `ovsnet networks` with endpoint groups: from fabricated network and endpoint
 * records, each group right under its parent with its own tag and endpoint count, in every
 * output form; a group whose parent is gone flagged as orphaned; networks without groups shown
 * exactly as before (the same columns and JSON fields); and `ovsnet networks` run as the operator
 * runs it (dist/src/main.js) on an embedded store holding those records.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import type { DockerNames } from '../../src/cli/docker-api.js';
import { DITTO, networkRows, networksShown, UNDER } from '../../src/cli/networks-view.js';
import { render, table } from '../../src/cli/output.js';
import type { EndpointRecord, NetworkRecord } from '../../src/driver/model/records.js';
import { keys } from '../../src/store/keys.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import { put } from '../../src/store/types.js';

const PARENT = 'aaaaaaaaaaaa1111111111111111111111111111111111111111111111111111';
const WEB = 'bbbbbbbbbbbb2222222222222222222222222222222222222222222222222222';
const DB = 'cccccccccccc3333333333333333333333333333333333333333333333333333';
const PLAIN = 'dddddddddddd4444444444444444444444444444444444444444444444444444';
const LOST = 'eeeeeeeeeeee5555555555555555555555555555555555555555555555555555';
const GONE = 'ffffffffffff6666666666666666666666666666666666666666666666666666';

const net = (networkId: string, tag: number, more: Partial<NetworkRecord> = {}): NetworkRecord => ({
  networkId,
  bridge: 'ovsbr0',
  tag,
  mtu: 1500,
  internal: false,
  ipv4: [{ pool: '10.5.0.0/24', gateway: '10.5.0.1/24' }],
  ipv6: [],
  createdAt: '',
  ...more,
});
const ep = (networkId: string, n: number): EndpointRecord => ({
  networkId,
  endpointId: `${networkId.slice(0, 4)}${n}`,
  address: `10.5.0.${n}/24`,
  mac: '02:00:00:00:00:01',
  hostVeth: `ovh${n}`,
  containerVeth: `ovc${n}`,
  portmap: [],
  createdAt: '',
});

// In the store's order: a group before its parent, a plain network between, an orphan.
const nets = [
  net(WEB, 3, { group: { name: 'web', parent: PARENT, allow: [{ group: 'app' }, { group: 'db', port: { number: 8080, proto: 'tcp' } }] } }),
  net(PLAIN, 5, { ipv4: [{ pool: '10.6.0.0/24', gateway: '10.6.0.1/24' }] }),
  net(LOST, 7, { group: { name: 'old', parent: GONE, allow: [] } }),
  net(PARENT, 2, { groupsName: 'app', allow: [{ group: 'web', port: { number: 5432, proto: 'udp' } }] }),
  net(DB, 4, { group: { name: 'db', parent: PARENT, allow: [] } }),
];
const eps = [ep(PARENT, 2), ep(WEB, 3), ep(WEB, 4), ep(DB, 5), ep(PLAIN, 6), ep(LOST, 8)];
const names: DockerNames = {
  networks: new Map([
    [PARENT, 'app'],
    [WEB, 'app-web'],
    [DB, 'app-db'],
    [PLAIN, 'plain'],
    [LOST, 'old-web'],
  ]),
  containers: new Map(),
};

t.test('rows: each group under its parent, with its tag and endpoint count; the orphan last', async (t) => {
  const rows = networkRows(nets, eps);
  t.same(
    rows.map((r) => [r.network, r.tag, r.endpoints]),
    [
      ['dddddddddddd', 5, 1],
      ['aaaaaaaaaaaa', 2, 1],
      ['cccccccccccc', 4, 1],
      ['bbbbbbbbbbbb', 3, 2],
      ['eeeeeeeeeeee', 7, 1],
    ],
    "the parent's count is its own endpoints; its groups by name",
  );
  t.same(rows[1]?.groups, [
    { networkId: 'cccccccccccc', name: 'db', tag: 4, endpoints: 1 },
    { networkId: 'bbbbbbbbbbbb', name: 'web', tag: 3, endpoints: 2 },
  ]);
  t.equal(rows[1]?.groupsName, 'app');
  t.same(rows[1]?.allow, [{ group: 'web', port: { number: 5432, proto: 'udp' } }], "the parent's own allows");
  t.same(rows[3]?.group, {
    name: 'web',
    parent: 'aaaaaaaaaaaa',
    allow: [{ group: 'app' }, { group: 'db', port: { number: 8080, proto: 'tcp' } }],
    orphaned: false,
  });
  t.same(rows[4]?.group, { name: 'old', parent: 'ffffffffffff', allow: [], orphaned: true });
  t.same(
    ['group', 'groups', 'groupsName', 'allow'].filter((k) => k in (rows[0] ?? {})),
    [],
    'a plain network: no group fields',
  );
  t.match(networkRows([net(PARENT, 2, { groupsName: 'app' })], [])[0], { groups: [], allow: [] }, 'a named parent with no group yet');
});

t.test('table: groups indented under their parent, ditto for the shared subnet and gateway', async (t) => {
  const shown = networksShown(networkRows(nets, eps), names);
  t.equal(
    table(shown.table),
    [
      'NETWORK         NAME     GROUP                                     TAG  SUBNETS      GATEWAY      MTU   ENDPOINTS',
      'dddddddddddd    plain                                              5    10.6.0.0/24  10.6.0.1/24  1500  1',
      'aaaaaaaaaaaa    app      app                                       2    10.5.0.0/24  10.5.0.1/24  1500  1',
      `${UNDER}cccccccccccc  app-db   db                                        4    ${DITTO}            ${DITTO}            1500  1`,
      `${UNDER}bbbbbbbbbbbb  app-web  web                                       3    ${DITTO}            ${DITTO}            1500  2`,
      'eeeeeeeeeeee    old-web  old (orphaned: parent ffffffffffff gone)  7    10.5.0.0/24  10.5.0.1/24  1500  1',
    ].join('\n'),
  );
  const wide = render(shown, 'wide').split('\n');
  t.match(wide[0], /^NETWORK\s+NAME\s+HOST\s+LOGICAL\s+GROUP\s+ALLOW\s+TAG\s+BRIDGE\s+SUBNETS\s+GATEWAY\s+INTERNAL\s+MTU\s+ENDPOINTS$/);
  t.match(wide[4], /^└ bbbbbbbbbbbb\s+app-web\s+web\s+app,db:8080\/tcp\s+3\s+ovsbr0\s+"\s+"\s+false\s+1500\s+2$/);
  t.match(wide[3], /^└ cccccccccccc\s+app-db\s+db\s+-\s+4/, 'a group with no allow: -');
  t.match(wide[2], /^aaaaaaaaaaaa\s+app\s+app\s+web:5432\/udp\s+2\s/, "the parent's allows");
  t.match(wide[1], /^dddddddddddd\s+plain\s+5\s/, 'a plain network: no group, no allow');
});

t.test('a group whose subnet differs from its parent shows its own, not a ditto', async (t) => {
  const odd = [
    net(PARENT, 2, { groupsName: 'app' }),
    net(WEB, 3, { ipv4: [{ pool: '10.9.0.0/24' }], group: { name: 'web', parent: PARENT, allow: [] } }),
  ];
  const rows = networksShown(networkRows(odd, []), undefined).table;
  t.match(rows[1], { network: `${UNDER}bbbbbbbbbbbb`, subnets: ['10.9.0.0/24'], gateway: '' });
});

t.test('json (-o json, --json): every existing field, plus group / groupsName and groups', async (t) => {
  const data = JSON.parse(render(networksShown(networkRows(nets, eps), names), 'json')) as Record<string, unknown>[];
  const fields = ['network', 'host', 'logical', 'tag', 'bridge', 'subnets', 'gateway', 'internal', 'mtu', 'endpoints', 'name'];
  for (const d of data) for (const f of fields) t.ok(f in d, `${String(d.network)} has ${f}`);
  t.same(data[0], {
    network: 'dddddddddddd',
    host: '',
    logical: '',
    tag: 5,
    bridge: 'ovsbr0',
    subnets: ['10.6.0.0/24'],
    gateway: '10.6.0.1/24',
    internal: false,
    mtu: 1500,
    endpoints: 1,
    name: 'plain',
  });
  t.match(data[1], { network: 'aaaaaaaaaaaa', name: 'app', groupsName: 'app', groups: [{ name: 'db' }, { name: 'web', endpoints: 2 }] });
  t.match(data[3], {
    network: 'bbbbbbbbbbbb',
    subnets: ['10.5.0.0/24'],
    gateway: '10.5.0.1/24',
    group: { name: 'web', parent: 'aaaaaaaaaaaa' },
  });
  t.match(data[4], { name: 'old-web', group: { orphaned: true } });
});

t.test('no groups: the columns and rows of before', async (t) => {
  const shown = networksShown(networkRows([net(PLAIN, 5)], [ep(PLAIN, 2)]), undefined);
  t.same(shown.table, [
    { network: 'dddddddddddd', name: '', tag: 5, subnets: ['10.5.0.0/24'], gateway: '10.5.0.1/24', mtu: 1500, endpoints: 1 },
  ]);
  t.same(Object.keys(shown.wide?.[0] ?? {}), [
    'network',
    'name',
    'host',
    'logical',
    'tag',
    'bridge',
    'subnets',
    'gateway',
    'internal',
    'mtu',
    'endpoints',
  ]);
});

t.test('`ovsnet networks` on a store holding the records: the same rows, in every form', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-networks-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'state.db');
  const store = new SqliteStore({ file });
  await store.txn({
    compares: [],
    success: [
      ...nets.map((n) => put(keys.network(n.networkId), JSON.stringify(n))),
      ...eps.map((e) => put(keys.endpoint(e.networkId, e.endpointId), JSON.stringify(e))),
    ],
  });
  await store.close();
  const root = new URL('../../../', import.meta.url).pathname;
  const env = {
    PATH: process.env.PATH ?? '',
    OVSNET_STORE: `sqlite:${file}`,
    OVSNET_SOCKET: path.join(dir, 'none.sock'),
    DOCKER_HOST: `unix://${path.join(dir, 'no-docker.sock')}`,
  };
  const ovsnet = (...args: string[]) =>
    spawnSync(process.execPath, [`${root}dist/src/main.js`, 'networks', '--settings-file', path.join(dir, 'none'), ...args], {
      env,
      encoding: 'utf8',
    });
  // The store lists records in key order (by network ID).
  const listed = [...nets].sort((a, b) => a.networkId.localeCompare(b.networkId));
  const expected = networksShown(networkRows(listed, eps), undefined);
  for (const [args, form] of [
    [[], 'table'],
    [['-o', 'wide'], 'wide'],
    [['-o', 'json'], 'json'],
    [['--json'], 'json'],
  ] as const) {
    const r = ovsnet(...args);
    t.equal(r.status, 0, r.stderr);
    t.equal(r.stdout, `${render(expected, form)}\n`, `ovsnet networks ${args.join(' ')}`);
  }
});
