/**
 * The CLI against a fake or compromised Docker Engine (DOCKER_HOST) and the daemons it points
 * to: a plugin ID, socket name or mount that would lead the CLI elsewhere is skipped, a path
 * from the daemon's answer that leaves its mount is dropped, so no file is opened (or chmod-ed)
 * as the store; Docker's names print escaped in tables and exact in JSON; any JSON shape is
 * survived.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { dockerNames, managedOvsnets, nameOf } from '../../src/cli/docker-api.js';
import { hasControl, render } from '../../src/cli/output.js';
import { networksShown, type NetworkRow } from '../../src/cli/networks-view.js';
import { VERSION } from '../../src/lib/version.js';
import { MAIN, run } from '../harness/host.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-hostile-engine-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
const emptyFile = path.join(dir, 'no-such-env-file');

/** A server on a unix socket answering `answer(url)` as JSON (404 when undefined). */
async function serve(socket: string, answer: (url: string) => unknown): Promise<void> {
  fs.mkdirSync(path.dirname(socket), { recursive: true });
  const server = http.createServer((req, res) => {
    const body = answer(req.url ?? '');
    res.writeHead(body === undefined ? 404 : 200).end(typeof body === 'string' ? body : JSON.stringify(body));
  });
  await new Promise<void>((r) => server.listen(socket, r));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise((r) => server.close(r));
  });
}

const plugin = (Id: string, Mounts: unknown[] = []) => ({
  Id,
  Name: 'ovsnet:latest',
  Enabled: true,
  Config: {
    Entrypoint: ['/usr/bin/node', '/opt/ovsnet/dist/src/main.js'],
    Interface: { Types: ['docker.networkdriver/1.0'], Socket: 'ovsnet.sock' },
  },
  Settings: { Mounts },
});

const info = (store: string) => ({
  version: VERSION,
  pid: 1,
  startedAt: new Date().toISOString(),
  uptimeSeconds: 1,
  settings: { OVSNET_STORE: store },
  store: { store, ok: true },
});

t.test('a plugin ID or a daemon path leading out of place: the file it names is never opened as the store', async (t) => {
  // Docker's plugin directory is /run/docker/plugins, and the default store is under /var/lib:
  // the CLI runs in a mount namespace of its own where both are this test's directories, so
  // nothing is made on the host.
  const run_ = path.join(dir, 'run');
  const varLib = path.join(dir, 'var-lib');
  fs.mkdirSync(varLib);
  let asked = 0;
  const victim = path.join(dir, 'victim');
  fs.writeFileSync(victim, 'precious\n', { mode: 0o644 });
  fs.chmodSync(victim, 0o644);
  // 1. An ID climbing out of /run/docker/plugins to a daemon the attacker runs.
  await serve(path.join(dir, 'evil', 'ovsnet.sock'), (url) => (url === '/ovsnet/v1/info' ? info(`sqlite:${victim}`) : undefined));
  // 2. A genuine-looking plugin whose daemon names a store path climbing out of its mount.
  const hex = 'f00d'.repeat(16);
  const mounted = path.join(dir, 'state');
  fs.mkdirSync(mounted);
  // A socket's path is at most 107 bytes: it is bound through a short link to its directory.
  fs.mkdirSync(path.join(run_, 'docker/plugins', hex), { recursive: true });
  fs.symlinkSync(path.join(run_, 'docker/plugins', hex), path.join(dir, 'p'));
  await serve(path.join(dir, 'p', 'ovsnet.sock'), (url) =>
    url === '/ovsnet/v1/info' && ++asked > 0 ? info(`sqlite:/var/lib/ovsnet/../../..${victim}`) : undefined,
  );
  for (const [what, p] of [
    ['an ID with ../', plugin(`../../..${path.join(dir, 'evil')}`)],
    ['a path out of its mount', plugin(hex, [{ Source: mounted, Destination: '/var/lib/ovsnet' }])],
  ] as const) {
    const engine = path.join(dir, `engine-${what.length}.sock`);
    await serve(engine, (url) => (url === '/plugins' ? [p] : []));
    const inRun = [
      '--mount',
      '--propagation',
      'private',
      '--',
      'sh',
      '-c',
      'mount --bind "$0" /run && mount --bind "$1" /var/lib && shift && exec "$@"',
      run_,
      varLib,
    ];
    const r = await run('unshare', [...inRun, process.execPath, MAIN, 'networks', '--settings-file', emptyFile], {
      env: { PATH: process.env.PATH ?? '', DOCKER_HOST: `unix://${engine}` },
      timeoutMs: 30_000,
    });
    t.equal(fs.statSync(victim).mode & 0o777, 0o644, `${what}: the file's mode is unchanged (exit ${r.code}: ${r.stderr.trim()})`);
    t.equal(fs.readFileSync(victim, 'utf8'), 'precious\n', `${what}: and its content`);
    t.notMatch(r.stdout + r.stderr, victim, `${what}: the CLI never took it for the store`);
  }
  t.ok(asked > 0, "the genuine-looking plugin's daemon was asked: the CLI reached it at /run/docker/plugins/ID/");
});

t.test('hostile plugin entries are skipped, whatever their shape', async (t) => {
  const engine = path.join(dir, 'engine-shapes.sock');
  const good = plugin('ab'.repeat(32));
  const entries: unknown[] = [
    null,
    5,
    { Id: 5 },
    plugin('AB'.repeat(32)),
    plugin('ab'.repeat(31)),
    { ...good, Config: { ...good.Config, Interface: { Types: ['docker.networkdriver/1.0'], Socket: '../../x.sock' } } },
    { ...good, Config: { ...good.Config, Interface: { Types: 'docker.networkdriver/1.0', Socket: 'ovsnet.sock' } } },
    { ...good, Name: 'ovsnet\u001b[2J' },
    plugin('cd'.repeat(32), [{ Source: '/', Destination: '/var/lib/ovsnet/..' }]),
    plugin('ef'.repeat(32), [{ Source: '/srv/../etc', Destination: '/var/lib/ovsnet' }]),
    good,
  ];
  await serve(engine, (url) => (url === '/plugins' ? entries : undefined));
  t.same(
    (await managedOvsnets(engine)).map((m) => m.socket),
    [`/run/docker/plugins/${'ab'.repeat(32)}/ovsnet.sock`],
    'only the well-formed plugin',
  );
  for (const body of ['{}', '"x"', 'null', '[', '{"Id":"x"}']) {
    const e = path.join(dir, `engine-${body.length}-${body.charCodeAt(0)}.sock`);
    await serve(e, () => body);
    t.same(await managedOvsnets(e), [], `/plugins answering ${body}`);
    t.equal(await dockerNames(e), undefined, `/networks answering ${body}: no names, no failure`);
  }
});

t.test("Docker's names: escaped in tables, exact in JSON; malformed entries skipped", async (t) => {
  const engine = path.join(dir, 'engine-names.sock');
  const id = `ab12cd34ef56${'0'.repeat(52)}`;
  const evil = '\u001b[2J\u001b]0;pwned\u0007web\u202e\u0085x\ny';
  await serve(engine, (url) =>
    url === '/networks'
      ? [{ Id: id, Name: evil }, { Id: '../x', Name: 'bad-id' }, { Id: 'cd'.repeat(32), Name: 7 }, null]
      : url === '/containers/json?all=1'
        ? [
            { Names: ['/ok1'], NetworkSettings: { Networks: { n: { EndpointID: 'ee'.repeat(32) } } } },
            { Names: ['/bad\u001bname'], NetworkSettings: { Networks: { n: { EndpointID: 'ff'.repeat(32) } } } },
            { Names: ['/ok2'], NetworkSettings: { Networks: { n: { EndpointID: 'not-an-id' } } } },
            { Names: 'x' },
          ]
        : undefined,
  );
  const names = await dockerNames(engine);
  t.same([...(names?.networks.keys() ?? [])], [id], 'only the network with a Docker ID and a string name');
  t.same([...(names?.containers ?? [])], [['ee'.repeat(32), 'ok1']], "only the container with Docker's name form and ID");
  t.equal(nameOf(names?.containers, 'ffffffffffff'), '');
  const row: NetworkRow = {
    network: id.slice(0, 12),
    host: '',
    logical: '',
    tag: 1,
    bridge: 'ovsnet0',
    subnets: ['10.1.0.0/24'],
    gateway: '10.1.0.1/24',
    internal: false,
    mtu: 1500,
    endpoints: 0,
  };
  const shown = networksShown([row], names);
  for (const format of ['table', 'wide'] as const) {
    const text = render(shown, format);
    t.notOk(text.split('\n').some(hasControl), `${format}: no control character reaches the terminal`);
    t.match(text, '\\x1b[2J\\x1b]0;pwned\\x07web\\u202e\\x85x\\x0ay', `${format}: the name, escaped`);
  }
  t.equal((JSON.parse(render(shown, 'json')) as { name: string }[])[0]?.name, evil, 'json: the name exact');
});
