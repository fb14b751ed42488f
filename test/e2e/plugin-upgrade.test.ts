/**
 * The managed plugin's upgrade, as docs/upgrading.md says it: both versions
 * pushed to a registry (Debian's docker-registry, inside the simulated host, its data in this
 * test's directory), the previous one installed from it with its settings, containers running;
 * then `docker plugin disable -f`, `docker plugin upgrade`, `docker plugin enable` while they ping
 * each other. The previous version is this repository at the commit before package.json took the
 * current version, built with its own scripts/plugin-build.sh.
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { VERSION } from '../../src/lib/version.js';
import { DockerHost, IMAGE, run } from '../harness/host.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const git = (...args: string[]) => execFileSync('git', ['-C', root, ...args], { encoding: 'utf8' }).trim();
const bump = git('log', '-1', '--format=%H', `-S"version": "${VERSION}"`, '--', 'package.json');
if (bump === '') throw new Error(`no commit sets package.json's version to ${VERSION}: is this clone shallow?`);
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-plugin-upgrade-'));
const oldTree = path.join(work, 'old-tree');
fs.mkdirSync(oldTree);
execFileSync('sh', ['-c', `git -C ${root} archive ${bump}^ | tar -x -C ${oldTree}`]);
fs.symlinkSync(fs.realpathSync(path.join(root, 'node_modules')), path.join(oldTree, 'node_modules'));
const oldVersion = (JSON.parse(fs.readFileSync(path.join(oldTree, 'package.json'), 'utf8')) as { version: string }).version;
const tag = (v: string) => v.split('.').slice(0, 2).join('.');

// Both plugin directories, built side by side.
const started = Date.now();
const builds = await Promise.all(
  [path.join(oldTree, 'scripts/plugin-build.sh'), path.join(root, 'scripts/plugin-build.sh')].map((script, i) =>
    run('bash', [script, path.join(work, i === 0 ? 'old' : 'new')], { timeoutMs: 600_000 }),
  ),
);
for (const b of builds) if (b.code !== 0) throw new Error(`plugin:build failed:\n${b.stderr}`);
const buildSeconds = (Date.now() - started) / 1000;

const host = await DockerHost.up('plugup');
// The registry: on the simulated host's own loopback (Docker trusts 127.0.0.0/8 over plain http).
const port = 15000;
const registryDir = path.join(work, 'registry');
fs.mkdirSync(registryDir);
fs.writeFileSync(
  path.join(work, 'registry.yml'),
  `version: 0.1\nlog: { level: info }\nstorage:\n  filesystem: { rootdirectory: ${registryDir} }\nhttp:\n  addr: 127.0.0.1:${port}\n`,
);
const registry = spawn('nsenter', [`--net=/run/netns/${host.name}`, '--', 'docker-registry', 'serve', path.join(work, 'registry.yml')], {
  stdio: ['ignore', 'pipe', 'pipe'],
});
let registryLog = '';
registry.stdout.on('data', (d: Buffer) => (registryLog += d.toString()));
registry.stderr.on('data', (d: Buffer) => (registryLog += d.toString()));
const registryClosed = new Promise((resolve) => registry.on('close', resolve));
t.teardown(async () => {
  await host.down();
  registry.kill('SIGTERM');
  await registryClosed;
  fs.rmSync(work, { recursive: true, force: true });
});
for (let i = 0; !registryLog.includes(`listening on 127.0.0.1:${port}`); i++) {
  if (i > 100 || registry.exitCode !== null) throw new Error(`docker-registry did not start:\n${registryLog}`);
  await new Promise((r) => setTimeout(r, 100));
}

const remote = (v: string) => `localhost:${port}/ovsnet:${tag(v)}`;
const ip = (c: string) => host.dockerOk(['inspect', '-f', '{{(index .NetworkSettings.Networks "upn").IPAddress}}', c]);
const ping = async (from: string, to: string) => (await host.docker(['exec', from, 'ping', '-c', '1', '-W', '2', to])).code === 0;
const stateDir = path.join(host.dir, 'plugin-state');
const secretsDir = path.join(host.dir, 'plugin-secrets');

t.test(`both versions pushed; the previous one (${oldVersion}) installed from the registry with its settings`, async (t) => {
  t.not(oldVersion, VERSION, `upgrading from ${oldVersion} to ${VERSION}`);
  t.comment(`both plugins built in ${buildSeconds.toFixed(0)} s`);
  for (const [v, dir] of [
    [oldVersion, 'old'],
    [VERSION, 'new'],
  ] as const) {
    const t0 = Date.now();
    await host.dockerOk(['plugin', 'create', remote(v), path.join(work, dir)]);
    const pushed = await host.docker(['plugin', 'push', remote(v)], 300_000);
    t.equal(pushed.code, 0, pushed.stderr);
    await host.dockerOk(['plugin', 'rm', remote(v)]);
    t.comment(`${remote(v)}: created and pushed in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  }
  fs.mkdirSync(stateDir, { mode: 0o700 });
  fs.mkdirSync(secretsDir, { mode: 0o700 });
  const install = await host.docker(
    [
      'plugin',
      'install',
      '--grant-all-permissions',
      '--alias',
      'ovsnet',
      remote(oldVersion),
      `state.source=${stateDir}`,
      `secrets.source=${secretsDir}`,
      'OVSNET_LOG_LEVEL=debug',
    ],
    300_000,
  );
  t.equal(install.code, 0, install.stderr);
  t.match(
    await host.dockerOk(['plugin', 'ls', '--format', '{{.Name}} {{.Enabled}} {{.PluginReference}}']),
    `ovsnet:latest true ${remote(oldVersion)}`,
  );
  await host.dockerOk(['network', 'create', '-d', 'ovsnet:latest', '--ipam-driver', 'ovsnet:latest', '--subnet', '10.73.0.0/24', 'upn']);
  for (const c of ['v1', 'v2']) await host.dockerOk(['run', '-d', '--name', c, '--network', 'upn', IMAGE, 'sleep', '600']);
  t.ok(await ping('v1', await ip('v2')), 'the containers talk');
});

t.test('disable -f, upgrade, enable: pings flow throughout, settings and state kept, new containers work', async (t) => {
  const refused = await host.docker(['plugin', 'disable', 'ovsnet']);
  t.not(refused.code, 0, 'Docker refuses to disable a plugin in use');
  t.match(refused.stderr, /in use/, refused.stderr);
  // A ping every 0.2 s in v1 through the whole upgrade, stopped (and counted) afterwards.
  const v2 = await ip('v2');
  await host.dockerOk(['exec', '-d', 'v1', 'sh', '-c', `ping -i 0.2 -W 1 ${v2} >/tmp/ping.log 2>&1 & echo $! >/tmp/ping.pid; wait`]);
  await new Promise((r) => setTimeout(r, 1000));
  const t0 = Date.now();
  await host.dockerOk(['plugin', 'disable', '-f', 'ovsnet']);
  const upgrade = await host.docker(
    ['plugin', 'upgrade', '--grant-all-permissions', '--skip-remote-check', 'ovsnet', remote(VERSION)],
    300_000,
  );
  t.equal(upgrade.code, 0, upgrade.stderr);
  t.comment(upgrade.stdout);
  t.match(upgrade.stdout, `Upgrading plugin ovsnet:latest from ${remote(oldVersion)} to ${remote(VERSION)}`);
  // Docker's upgrade replaces the plugin's config, and with it the mount sources `plugin set`
  // gave (its env settings are kept): they are set again before enabling, or the new version
  // would start on the default /var/lib/ovsnet and /etc/ovsnet.
  const mountsAfter = JSON.parse(await host.dockerOk(['plugin', 'inspect', '-f', '{{json .Config.Mounts}}', 'ovsnet'])) as {
    Name: string;
    Source: string;
  }[];
  t.same(
    mountsAfter.map((m) => [m.Name, m.Source]),
    [
      ['ovs', '/var/run/openvswitch'],
      ['state', '/var/lib/ovsnet'],
      ['secrets', '/etc/ovsnet'],
      ['docker', '/var/run/docker.sock'],
    ],
    "after the upgrade, the mount sources are the new config's defaults (the Docker socket's mount new in this version)",
  );
  await host.dockerOk(['plugin', 'set', 'ovsnet', `state.source=${stateDir}`, `secrets.source=${secretsDir}`]);
  await host.dockerOk(['plugin', 'enable', 'ovsnet']);
  const downSeconds = (Date.now() - t0) / 1000;
  t.ok(await ping('v1', v2), 'still talking after the upgrade');
  await host.dockerOk(['exec', 'v1', 'sh', '-c', 'kill -INT $(cat /tmp/ping.pid); sleep 0.5']);
  const pings = await host.dockerOk(['exec', 'v1', 'cat', '/tmp/ping.log']);
  const [, sent, received] = /(\d+) packets transmitted, (\d+) packets received/.exec(pings) ?? [];
  t.ok(Number(sent) > 5 * downSeconds, `pings sent through the ${downSeconds.toFixed(0)} s of disable, upgrade, enable: ${sent}`);
  t.ok(Number(sent) - Number(received) <= 2, `answered: ${received} of ${sent}`);

  t.match(
    await host.dockerOk(['plugin', 'ls', '--format', '{{.Name}} {{.Enabled}} {{.PluginReference}}']),
    `ovsnet:latest true ${remote(VERSION)}`,
  );
  const settings = JSON.parse(await host.dockerOk(['plugin', 'inspect', '-f', '{{json .Settings}}', 'ovsnet'])) as {
    Mounts: { Name: string; Source: string }[];
    Env: string[];
  };
  t.same(
    settings.Mounts.filter((m) => m.Name !== 'ovs').map((m) => [m.Name, m.Source]),
    [
      ['state', stateDir],
      ['secrets', secretsDir],
    ],
    'the mounts as set at install',
  );
  t.ok(settings.Env.includes('OVSNET_LOG_LEVEL=debug'), 'and the settings');

  // The new version, through the host-side launcher in its rootfs.
  const dockerRoot = (await host.exec(['docker', 'info', '-f', '{{.DockerRootDir}}'])).stdout.trim();
  const id = await host.dockerOk(['plugin', 'inspect', '-f', '{{.Id}}', 'ovsnet']);
  const cli = (args: string[]) => host.exec(['sh', `${dockerRoot}/plugins/${id}/rootfs/app/deploy/ovsnet-cli`, ...args]);
  const version = await cli(['version', '-o', 'json']);
  t.equal(version.code, 0, version.stderr);
  t.match(JSON.parse(version.stdout), { client: { version: VERSION }, daemon: { version: VERSION, store: { ok: true } } });
  const nets = await cli(['networks', '-o', 'json']);
  t.equal(nets.code, 0, nets.stderr);
  t.match(
    JSON.parse(nets.stdout),
    [{ name: 'upn', subnets: ['10.73.0.0/24'], endpoints: 2 }],
    "the previous version's network and endpoints",
  );

  await host.dockerOk(['run', '-d', '--name', 'v3', '--network', 'upn', IMAGE, 'sleep', '600']);
  t.equal(await ip('v3'), '10.73.0.4', 'a new address: the old reservations are kept');
  t.ok(await ping('v3', await ip('v1')), 'a new container reaches an old one');
  await host.dockerOk(['rm', '-f', 'v1', 'v2', 'v3']);
  await host.dockerOk(['network', 'rm', 'upn']);
  t.equal((await host.exec(['ovs-vsctl', 'list-ports', 'ovsnet0'])).stdout.trim(), '', 'every container left cleanly: no port left');
  await host.dockerOk(['plugin', 'disable', 'ovsnet']);
  await host.dockerOk(['plugin', 'rm', 'ovsnet']);
  t.equal(await host.dockerOk(['plugin', 'ls', '-q']), '', 'and the plugin removed');
});
