/**
 * The CNI plugin binary (dist/src/cni/client.js, run as a runtime runs it: environment and
 * stdin) against the daemon's CNI server on a unix socket: results and CNI error objects on
 * stdout, never a stack trace; VERSION answered without a daemon; no daemon, a daemon stopped
 * mid-request or a store that does not answer: error 11 (try again later) with the reason; an
 * RPC version either side does not speak: INCOMPATIBLE_API_VERSION naming both.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { buildCniServer } from '../../src/cni/server.js';
import { CniService } from '../../src/cni/service.js';
import { OvsnetError } from '../../src/lib/errors.js';
import { createLogger } from '../../src/lib/log.js';
import type { Store } from '../../src/store/types.js';
import { cniSetup } from '../helpers/cni.js';
import { plugin } from '../helpers/cni-plugin.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-cni-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

const conf = (socket: string, extra: Record<string, unknown> = {}) => ({
  cniVersion: '1.0.0',
  name: 'podnet',
  type: 'ovsnet',
  network: 'net1',
  socket,
  ...extra,
});

async function serve(t: Test, service: CniService, name: string) {
  const socket = path.join(dir, `${name}.cni`);
  const app = buildCniServer(service, createLogger('silent'));
  await app.listen({ path: socket });
  t.teardown(() => app.close());
  return socket;
}

t.test('VERSION needs no daemon', async (t) => {
  const r = await plugin('VERSION', { cniVersion: '1.1.0' });
  t.equal(r.status, 0);
  t.same(r.json, { cniVersion: '1.1.0', supportedVersions: ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] });
});

t.test('ADD, CHECK and DEL through the plugin binary', async (t) => {
  const { service, used } = await cniSetup(t);
  const socket = await serve(t, service, 'ok');
  const add = await plugin('ADD', conf(socket));
  t.equal(add.status, 0, add.out);
  t.match(add.json, { cniVersion: '1.0.0', ips: [{ address: /^10\.1\.0\.\d+\/24$/, gateway: '10.1.0.1' }] });
  t.equal(add.err, '');
  t.comment(`plugin ADD, process start to exit: ${add.ms.toFixed(1)} ms`);
  const again = await plugin('ADD', conf(socket));
  t.same(again.json, add.json, 'a repeated ADD: the same result');
  t.equal((await plugin('CHECK', conf(socket))).status, 0);
  const del = await plugin('DEL', conf(socket));
  t.equal(del.status, 0);
  t.equal(del.out, '', 'DEL prints nothing');
  t.equal(used(), 0);
  t.equal((await plugin('DEL', conf(socket), { CNI_CONTAINERID: 'never-seen' })).status, 0, 'DEL of an unknown container');
  const status = await plugin('STATUS', conf(socket, { cniVersion: '1.1.0' }));
  t.equal(status.status, 0, 'STATUS: available');
});

t.test('coded errors for what the runtime or the configuration got wrong', async (t) => {
  const { service } = await cniSetup(t);
  const socket = await serve(t, service, 'bad');
  const cases: [string, Record<string, unknown> | string, Record<string, string>, number, RegExp][] = [
    ['ADD', '{not json', {}, 6, /^DECODING_FAILURE: .*not a JSON object/],
    ['ADD', conf(socket, { cniVersion: '9.9.9' }), {}, 1, /^INCOMPATIBLE_CNI_VERSION: .*one of 0\.3\.0/],
    ['ADD', conf(socket), { CNI_NETNS: '' }, 4, /^INVALID_ENVIRONMENT_VARIABLES: CNI_NETNS is not set: ADD needs it/],
    ['ADD', conf(socket), { CNI_IFNAME: 'much-too-long-name' }, 4, /CNI_IFNAME "much-too-long-name" is not an interface name/],
    ['ADD', conf(socket, { network: '' }), {}, 7, /^INVALID_NETWORK_CONFIG: .*has no "network"/],
    ['ADD', conf(socket, { network: 'nonet' }), {}, 7, /^INVALID_NETWORK_CONFIG: .*"nonet" is no ovsnet network of this host/],
    [
      'FROB',
      conf(socket),
      {},
      4,
      /^INVALID_ENVIRONMENT_VARIABLES: CNI_COMMAND is "FROB": expected one of ADD, DEL, CHECK, GC, STATUS, VERSION/,
    ],
  ];
  for (const [command, config, env, code, msg] of cases) {
    const r = await plugin(command, config, env);
    t.equal(r.status, 1, `${command} ${JSON.stringify(env)}: exit 1`);
    t.equal(r.json.code, code, String(r.json.msg));
    t.match(String(r.json.msg), msg);
    t.equal(r.err, '', 'nothing on stderr: no stack trace');
  }
});

t.test('try again later: no daemon, a daemon stopped mid-request, a store that does not answer', async (t) => {
  const none = await plugin('ADD', conf(path.join(dir, 'nobody.cni')));
  t.equal(none.json.code, 11);
  t.match(
    String(none.json.msg),
    /^TRY_AGAIN_LATER: the ovsnet daemon is not answering on .*nobody\.cni \(not running, or starting; ENOENT\)/,
  );

  // A daemon that reads the request and dies before answering.
  const dying = path.join(dir, 'dying.cni');
  const server = http.createServer((req) => req.on('data', () => req.socket.destroy()));
  await new Promise<void>((r) => server.listen(dying, r));
  t.teardown(() => server.close());
  const cut = await plugin('ADD', conf(dying));
  t.equal(cut.json.code, 11);
  t.match(String(cut.json.msg), /stopped answering|did not answer/);

  // The store unreachable (a daemon starting before etcd, or etcd down).
  const { service: real } = await cniSetup(t);
  const down = new Proxy({} as Store, {
    get: (_o, prop) =>
      prop === 'kind'
        ? 'etcd'
        : () => Promise.reject(new OvsnetError('STORE_UNAVAILABLE', 'etcd at 127.0.0.1:2379 is unreachable: connect ECONNREFUSED')),
  });
  const deps = (real as unknown as { deps: ConstructorParameters<typeof CniService>[0] }).deps;
  const socket = await serve(t, new CniService({ ...deps, store: down }), 'down');
  const r = await plugin('ADD', conf(socket));
  t.equal(r.json.code, 11);
  t.match(String(r.json.msg), /^TRY_AGAIN_LATER: etcd at 127\.0\.0\.1:2379 is unreachable.*\(STORE_UNAVAILABLE\)/);
  const status = await plugin('STATUS', conf(socket, { cniVersion: '1.1.0' }));
  t.equal(status.json.code, 50, 'STATUS: not available');
});

t.test('an RPC version either side does not speak: INCOMPATIBLE_API_VERSION with both versions', async (t) => {
  const { service } = await cniSetup(t);
  const socket = await serve(t, service, 'versions');
  // An older or newer plugin asking this daemon.
  const answer = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const req = http.request(
      { socketPath: socket, path: '/cni', method: 'POST', headers: { 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve(JSON.parse(text) as Record<string, unknown>));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify({ rpcVersion: '0', command: 'ADD', config: JSON.stringify(conf(socket)) }));
  });
  t.match(answer, {
    rpcVersion: '1',
    error: { code: 202, msg: /^INCOMPATIBLE_API_VERSION: the plugin speaks ovsnet CNI RPC version "0", this daemon version 1/ },
  });
  // This plugin asking a daemon of another version.
  const newer = path.join(dir, 'newer.cni');
  const server = http.createServer((_req, res) => res.end(JSON.stringify({ rpcVersion: '2', result: {} })));
  await new Promise<void>((r) => server.listen(newer, r));
  t.teardown(() => server.close());
  const r = await plugin('ADD', conf(newer));
  t.equal(r.json.code, 202);
  t.match(String(r.json.msg), /this plugin speaks ovsnet CNI RPC version 1, the daemon on .* version 2/);
});
