/** The wire as Docker speaks it: inject() for the protocol, the real socket for listening. */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import t from 'tap';
import { createLogger } from '../../src/lib/log.js';
import { listenOnSocket, removeSocket } from '../../src/plugin-api/listen.js';
import { buildServer } from '../../src/plugin-api/server.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import { dockerCaller } from '../helpers/inject.js';
import { makeIpam } from '../helpers/ipam.js';
import { staleSocket } from '../helpers/stale-socket.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-srv-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

const lines: Record<string, unknown>[] = [];
const texts: string[] = [];
const sink = new Writable({
  write(chunk: Buffer, _enc, cb) {
    for (const l of chunk.toString().split('\n')) {
      if (l.trim() === '') continue;
      texts.push(l);
      lines.push(JSON.parse(l) as Record<string, unknown>);
    }
    cb();
  },
});
const store = new SqliteStore({ file: path.join(dir, 'state.db') });
const log = createLogger('info', sink);
const ipam = makeIpam(store, { log: log.child({ component: 'ipam' }) });
let answered = 0;
const app = buildServer({ log, ipam, bodyLimit: 4096, onCall: () => answered++ });
t.teardown(async () => {
  await app.close();
  await ipam.stop();
  await store.close();
});

const call = dockerCaller(app);

/** A call exactly as Docker makes it; every answer has a body type. */
async function docker(method: string, body?: unknown) {
  const res = await call(method, body);
  t.notOk(res.contentType === undefined, 'every answer has a body type');
  return { status: res.status, body: res.body };
}

t.test('calls without arguments come with an empty body', async (t) => {
  t.same(await docker('Plugin.Activate'), { status: 200, body: { Implements: ['IpamDriver'] } });
  t.same(await docker('IpamDriver.GetCapabilities'), { status: 200, body: { RequiresMACAddress: false, RequiresRequestReplay: false } });
  t.same(await docker('IpamDriver.GetDefaultAddressSpaces'), {
    status: 200,
    body: { LocalDefaultAddressSpace: 'LocalDefault', GlobalDefaultAddressSpace: 'GlobalDefault' },
  });
});

t.test('a network create, then an endpoint, then removal, as Docker sequences them', async (t) => {
  const pool = await docker('IpamDriver.RequestPool', {
    AddressSpace: 'LocalDefault',
    Pool: '10.80.0.0/24',
    SubPool: '',
    Options: {},
    V6: false,
  });
  t.same(pool, { status: 200, body: { PoolID: 'LocalDefault/10.80.0.0/24', Pool: '10.80.0.0/24', Data: {} } });
  const PoolID = 'LocalDefault/10.80.0.0/24';
  t.same(
    (await docker('IpamDriver.RequestAddress', { PoolID, Address: '', Options: { RequestAddressType: 'com.docker.network.gateway' } }))
      .body,
    { Address: '10.80.0.1/24', Data: {} },
  );
  t.same((await docker('IpamDriver.RequestAddress', { PoolID, Address: '', Options: null })).body, { Address: '10.80.0.2/24', Data: {} });
  t.same(
    (await docker('IpamDriver.RequestAddress', { PoolID, Address: '', Options: { 'com.docker.network.endpoint.name': 'web' } })).body,
    { Address: '10.80.0.3/24', Data: {} },
    'v29 sends the endpoint name',
  );
  const taken = await docker('IpamDriver.RequestAddress', { PoolID, Address: '10.80.0.3', Options: null });
  t.equal(taken.status, 500);
  t.match(taken.body, { Err: /10\.80\.0\.3 is already in use in pool 10\.80\.0\.0\/24: reserved by a container "web"/ });
  t.same(await docker('IpamDriver.ReleaseAddress', { PoolID, Address: '10.80.0.3' }), { status: 200, body: {} });
  t.same(await docker('IpamDriver.ReleaseAddress', { PoolID, Address: '10.80.0.3' }), { status: 200, body: {} }, 'idempotent');
  t.same(await docker('IpamDriver.ReleasePool', { PoolID }), { status: 200, body: {} });
  t.same(await docker('IpamDriver.ReleasePool', { PoolID }), { status: 200, body: {} }, 'idempotent');
});

t.test('keyed by holder over the wire: a retried named request gets the same address; sticky: a recreated name gets it back', async (t) => {
  const ask = async (PoolID: string, name: string) =>
    (await docker('IpamDriver.RequestAddress', { PoolID, Address: '', Options: { 'com.docker.network.endpoint.name': name } })).body;
  const used = (pool: string) => ipam.usage().find((u) => u.pool === pool)?.count;
  const plainPool = await docker('IpamDriver.RequestPool', { AddressSpace: '', Pool: '10.81.0.0/24', SubPool: '', Options: {}, V6: false });
  const P = (plainPool.body as { PoolID: string }).PoolID;
  const first = await ask(P, 'api');
  t.same(await ask(P, 'api'), first, 'retried: the same address');
  t.equal(used('10.81.0.0/24'), 1, 'the count moved once');
  await docker('IpamDriver.ReleaseAddress', { PoolID: P, Address: (first as { Address: string }).Address.split('/')[0] });
  await ask(P, 'other');
  t.not(
    ((await ask(P, 'api')) as { Address: string }).Address,
    (first as { Address: string }).Address,
    'not sticky: a recreated name gets the next address',
  );

  const stickyPool = await docker('IpamDriver.RequestPool', {
    AddressSpace: '',
    Pool: '10.82.0.0/24',
    SubPool: '',
    Options: { 'ovsnet.sticky': 'true' },
    V6: false,
  });
  const S = (stickyPool.body as { PoolID: string }).PoolID;
  const web = (await ask(S, 'web')) as { Address: string };
  await docker('IpamDriver.ReleaseAddress', { PoolID: S, Address: web.Address.split('/')[0] });
  const other = (await ask(S, 'other')) as { Address: string };
  t.not(other.Address, web.Address, "a newcomer does not take the released name's address while it is free");
  t.same(await ask(S, 'web'), web, 'sticky: the recreated name gets its address back');
  t.equal(used('10.82.0.0/24'), 2);
  for (const a of [web.Address, other.Address]) await docker('IpamDriver.ReleaseAddress', { PoolID: S, Address: a.split('/')[0] });
  for (const id of [P, S]) t.same(await docker('IpamDriver.ReleasePool', { PoolID: id }), { status: 200, body: {} });
});

t.test('bad requests: the field and the expected form, as {"Err"}', async (t) => {
  const cases: [string, unknown, RegExp][] = [
    ['IpamDriver.RequestPool', '', /RequestPool: the request body is empty; expected a JSON object/],
    ['IpamDriver.RequestPool', { Pool: 5 }, /RequestPool: Pool must be a string, got 5/],
    ['IpamDriver.RequestPool', { Pool: '10.0.0.0/24', V6: 'no' }, /RequestPool: V6 must be true or false, got "no"/],
    ['IpamDriver.RequestPool', { Pool: '10.0.0.0/24', Options: { a: 1 } }, /RequestPool: Options\.a must be a string, got 1/],
    ['IpamDriver.RequestAddress', { Address: '' }, /RequestAddress: PoolID is missing; expected a PoolID/],
    ['IpamDriver.ReleaseAddress', { PoolID: 'LocalDefault/10.1.0.0/24', Address: '' }, /ReleaseAddress: Address is empty/],
    ['IpamDriver.ReleasePool', [1], /ReleasePool: the request body must be a JSON object/],
    [
      'IpamDriver.RequestAddress',
      { PoolID: 'LocalDefault/10.1.0.0/24', Address: '' },
      /pool "LocalDefault\/10\.1\.0\.0\/24" does not exist/,
    ],
  ];
  for (const [method, body, err] of cases) {
    const res = await docker(method, body);
    t.equal(res.status, 500, method);
    t.match(res.body, { Err: err });
  }
  const notJson = await docker('IpamDriver.RequestPool', '{nope');
  t.equal(notJson.status, 400);
  t.match(notJson.body, { Err: /not JSON/ });
  const unknown = await docker('IpamDriver.Frobnicate', {});
  t.equal(unknown.status, 404);
  t.match(unknown.body, { Err: /not a method of ovsnet/ });
  const big = await docker('IpamDriver.RequestPool', { Pool: 'x'.repeat(5000) });
  t.equal(big.status, 413);
  t.match(big.body, { Err: /larger than 4096 bytes/ });
});

t.test('one request id per Docker call in the logs', async (t) => {
  lines.length = 0;
  texts.length = 0;
  await docker('IpamDriver.RequestPool', { Pool: '10.81.0.0/24', V6: false });
  await docker('IpamDriver.RequestPool', { Pool: '10.81.0.0/24', V6: false });
  const calls = lines.filter((l) => l.msg === 'docker call');
  t.equal(calls.length, 2);
  t.match(calls[0], { method: 'IpamDriver.RequestPool', status: 200, requestId: /^[0-9a-f]{8}$/ });
  t.match(calls[1], { status: 500, requestId: /^[0-9a-f]{8}$/ });
  t.not(calls[0]?.requestId, calls[1]?.requestId, 'each call its own id');
  const warn = lines.find((l) => l.code === 'IPAM_POOL_OVERLAP');
  t.equal(warn?.requestId, calls[1]?.requestId, "the error line carries its call's id");
  const made = lines.find((l) => l.msg === 'pool requested');
  t.equal(made?.requestId, calls[0]?.requestId, "a line of the IPAM module, logged during the call, carries the call's id");
  t.equal(made?.component, 'ipam');
  t.same(
    texts.filter((l) => l.split('"requestId"').length > 2),
    [],
    'no line names its call twice',
  );
  t.notOk('poolId' in (calls[0] ?? {}), "a line does not inherit the fields of the call's earlier lines");
});

t.test('onCall: told once per call that may do work, refused ones too; not of health checks nor of unknown routes', async (t) => {
  const before = answered;
  await docker('IpamDriver.RequestPool', { Pool: '10.81.0.0/24', V6: false }); // refused: overlaps
  t.equal(answered - before, 1, 'a refused RequestPool');
  await docker('IpamDriver.GetCapabilities', {});
  await docker('NetworkDriver.GetCapabilities', {});
  await docker('IpamDriver.GetDefaultAddressSpaces', {});
  const unknown = await app.inject({ method: 'POST', url: '/NoSuch.Method', payload: '{}' });
  t.equal(unknown.statusCode, 404);
  t.equal(answered - before, 1, "capabilities, address spaces (ovsnet doctor's kind of poll) and a 404: not told");
});

function post(socketPath: string, method: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, path: `/${method}`, method: 'POST' }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

t.test('the real socket: created with its directory, mode 0660, stale one replaced, live one refused', async (t) => {
  const socket = path.join(dir, 'plugins', 'ovsnet.sock');
  fs.mkdirSync(path.dirname(socket));
  // A stale socket: bound, then its server gone.
  // A stale socket, as a killed daemon leaves it; a
  // regular file there would be refused, never deleted (socket-path.test.ts).
  staleSocket(socket);
  t.ok(fs.lstatSync(socket).isSocket(), 'a stale socket is left');
  const srv = buildServer({ log: createLogger('silent'), ipam });
  await listenOnSocket(srv, socket);
  t.equal(fs.statSync(socket).mode & 0o777, 0o660);
  t.same(await post(socket, 'Plugin.Activate'), { status: 200, body: '{"Implements":["IpamDriver"]}' });
  const second = buildServer({ log: createLogger('silent'), ipam });
  await t.rejects(listenOnSocket(second, socket), { message: /another process already serves .*ovsnet\.sock/ });
  await srv.close();
  removeSocket(socket);
  t.notOk(fs.existsSync(socket));
});
