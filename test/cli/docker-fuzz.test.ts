/**
 * The CLI's inputs from Docker's Engine API under mutation, with fast-check: a fake Engine on a
 * unix socket answers GET /plugins, /info, /networks and /containers/json with mutated JSON
 * (wrong types, missing fields, hostile IDs and names: escapes, paths). The CLI must never fail
 * with anything but a clear error (Docker's names are a help: no names rather than a crash),
 * never take a plugin's socket path outside Docker's plugin directory, never print control
 * characters in a table, and keep JSON output exact.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import t from 'tap';
import { dockerNames, dockerNetworkPlugins, managedOvsnets } from '../../src/cli/docker-api.js';
import { networkRows, networksShown } from '../../src/cli/networks-view.js';
import { render } from '../../src/cli/output.js';
import type { NetworkRecord } from '../../src/driver/model/records.js';
import { isOvsnetError } from '../../src/lib/errors.js';

const NET = 'ab12cd34ef56'.padEnd(64, '0');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-docker-fuzz-'));
const socket = path.join(dir, 'docker.sock');
/** What the fake Engine answers, per path (the run sets it). */
let answers: Record<string, string> = {};
const server = http.createServer((req, res) => {
  const body = answers[req.url ?? ''];
  res.writeHead(body === undefined ? 404 : 200, { 'content-type': 'application/json' }).end(body ?? '{"message":"page not found"}');
});
await new Promise<void>((r) => server.listen(socket, r));
t.teardown(() => {
  server.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const hostile = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.constantFrom('../../../etc', '/abs', 'a/b', '\u001b[2J\u001b[H', 'x\u0007', '\u009b31m', 'ok\r\nforged line', '', 'a'.repeat(64)),
  fc.stringMatching(/^[0-9a-f]{64}$/),
);
const value = fc.oneof(hostile, fc.jsonValue({ maxDepth: 2 }));
/** A field kept as Docker sends it, mutated, or gone. */
const field = <T>(good: fc.Arbitrary<T>) => fc.oneof(good, value, fc.constant(undefined));

const pluginArb = fc.record({
  Id: field(fc.oneof(fc.stringMatching(/^[0-9a-f]{64}$/), hostile)),
  Name: field(hostile),
  Enabled: field(fc.boolean()),
  Config: field(
    fc.record({
      Entrypoint: field(fc.constant(['node', '/ovsnet/dist/src/main.js'])),
      Interface: field(
        fc.record({
          Types: field(fc.constant(['docker.networkdriver/1.0'])),
          Socket: field(fc.oneof(fc.constant('ovsnet.sock'), hostile)),
        }),
      ),
    }),
  ),
  Settings: field(fc.record({ Mounts: field(fc.constant([])) })),
});
/** An ovsnet plugin as Docker lists it, but for its Id and socket name, which may be anything. */
const ovsnetPluginArb = fc.record({
  Id: fc.oneof(fc.stringMatching(/^[0-9a-f]{64}$/), hostile),
  Name: fc.constant('ovsnet:latest'),
  Enabled: fc.boolean(),
  Config: fc.record({
    Entrypoint: fc.constant(['node', '/ovsnet/dist/src/main.js']),
    Interface: fc.record({ Types: fc.constant(['docker.networkdriver/1.0']), Socket: fc.oneof(fc.constant('ovsnet.sock'), hostile) }),
  }),
  Settings: fc.constant({ Mounts: [] }),
});
const networkArb = fc.record({ Id: field(fc.oneof(fc.constant(NET), hostile)), Name: field(hostile) });
const containerArb = fc.record({
  Names: field(fc.array(field(hostile), { maxLength: 2 })),
  NetworkSettings: field(fc.record({ Networks: field(fc.dictionary(hostile, fc.record({ EndpointID: field(hostile) }))) })),
});
/** Each path: a list of mutated items, or any JSON at all, or not JSON. */
const answer = <T>(item: fc.Arbitrary<T>) =>
  fc.oneof(
    fc.array(item, { maxLength: 3 }).map((x) => JSON.stringify(x)),
    value.map((x) => JSON.stringify(x) ?? 'null'),
    fc.constantFrom('', '{', 'not json'),
  );
const engineArb = fc.record({
  '/plugins': fc.oneof(
    answer(pluginArb),
    fc.array(ovsnetPluginArb, { minLength: 1, maxLength: 2 }).map((x) => JSON.stringify(x)),
  ),
  '/info': answer(fc.record({ Plugins: field(fc.record({ Network: field(fc.array(hostile, { maxLength: 2 })) })) })),
  '/networks': answer(networkArb),
  '/containers/json?all=1': answer(containerArb),
});

/** Either resolves, or rejects with one of ovsnet's errors (a clear message, never a TypeError's stack). */
async function clear<T>(p: Promise<T>): Promise<{ value?: T; bad?: string }> {
  try {
    return { value: await p };
  } catch (err) {
    return isOvsnetError(err) ? {} : { bad: String(err) };
  }
}

const record: NetworkRecord = {
  networkId: NET,
  bridge: 'ovsnet0',
  tag: 2,
  mtu: 1500,
  internal: false,
  ipv4: [{ pool: '10.5.0.0/24', gateway: '10.5.0.1/24' }],
  ipv6: [],
  createdAt: '',
};
const rows = networkRows([record], []);
// Control characters: C0 but the newline that separates rows, DEL, C1.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;
const opts = { numRuns: 150, seed: 22 };

/** One property over the fake Engine's answers; todo when a property is known to fail. */
function holds<T>(name: string, todo: string | undefined, arb: fc.Arbitrary<T>, check: (value: T) => Promise<boolean>): void {
  t.test(name, todo === undefined ? {} : { todo }, async () => {
    await fc.assert(fc.asyncProperty(arb, check), opts);
  });
}

/** What `ovsnet networks` shows when Docker names the network `name`. */
async function shownWith(name: string) {
  answers = { '/networks': JSON.stringify([{ Id: NET, Name: name }]), '/containers/json?all=1': '[]' };
  return networksShown(rows, await dockerNames(socket));
}

holds('JSON output is exact: the name Docker gave, as it gave it', undefined, hostile, async (name) => {
  return (JSON.parse(render(await shownWith(name), 'json')) as { name: string }[])[0]?.name === name;
});

holds("Docker's answers, whatever they are, never fail the CLI but with a clear error", undefined, engineArb, async (engine) => {
  answers = engine;
  const results = [await clear(managedOvsnets(socket)), await clear(dockerNetworkPlugins(socket)), await clear(dockerNames(socket))];
  return results.every((r) => r.bad === undefined);
});

holds("a managed plugin's socket is always in Docker's plugin directory, under a 64-hex ID", undefined, engineArb, async (engine) => {
  answers = engine;
  const found = (await clear(managedOvsnets(socket))).value ?? [];
  return found.every((f) => /^\/run\/docker\/plugins\/[0-9a-f]{64}\/[^/]+$/.test(f.socket) && !f.socket.includes('/../'));
});

holds('no control character from Docker reaches the table', undefined, hostile, async (name) => {
  const shown = await shownWith(name);
  return !CONTROL.test(render(shown, 'table')) && !CONTROL.test(render(shown, 'wide'));
});
