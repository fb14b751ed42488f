/**
 * The managed plugin: built by `npm run plugin:build` with no registry, installed with
 * `docker plugin create` + `enable`, used as `-d ovsnet:latest --ipam-driver ovsnet:latest`,
 * through disable -f / enable and a dockerd restart.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { DockerHost, IMAGE, run } from '../harness/host.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-plugin-'));
const build = await run('bash', [`${root}scripts/plugin-build.sh`, dir], { timeoutMs: 300_000 });
if (build.code !== 0) throw new Error(`plugin:build failed:\n${build.stderr}`);
const host = await DockerHost.up('plugin');
t.teardown(async () => {
  await host.down();
  fs.rmSync(dir, { recursive: true, force: true });
});

const ping = async (from: string, to: string) => (await host.docker(['exec', from, 'ping', '-c', '1', '-W', '2', to])).code === 0;
const ip = (c: string) => host.dockerOk(['inspect', '-f', '{{(index .NetworkSettings.Networks "pn").IPAddress}}', c]);

t.test('install: create, point its state at this host, enable', async (t) => {
  t.match(build.stdout, /managed plugin in /);
  await host.dockerOk(['plugin', 'create', 'ovsnet', dir]);
  // The state mount is settable: this host's own directory, not the machine's /var/lib.
  fs.mkdirSync(path.join(host.dir, 'plugin-state'));
  await host.dockerOk(['plugin', 'set', 'ovsnet', `state.source=${path.join(host.dir, 'plugin-state')}`]);
  await host.dockerOk(['plugin', 'enable', 'ovsnet']);
  t.match(await host.dockerOk(['plugin', 'ls', '--format', '{{.Name}} {{.Enabled}}']), /ovsnet:latest true/);
});

t.test('a network of the managed plugin: two containers talk', async (t) => {
  await host.dockerOk(['network', 'create', '-d', 'ovsnet:latest', '--ipam-driver', 'ovsnet:latest', '--subnet', '10.70.0.0/24', 'pn']);
  await host.dockerOk(['run', '-d', '--restart', 'always', '--name', 'p1', '--network', 'pn', IMAGE, 'sleep', '600']);
  await host.dockerOk(['run', '-d', '--restart', 'always', '--name', 'p2', '--network', 'pn', IMAGE, 'sleep', '600']);
  t.equal(await ip('p1'), '10.70.0.2', "ovsnet's IPAM");
  t.ok(await ping('p1', await ip('p2')));
  t.ok(fs.existsSync(path.join(host.dir, 'plugin-state', 'ovsnet', 'state.db')), 'state in the mounted directory');
});

t.test('disable -f and enable: containers keep talking, new ones start', async (t) => {
  await host.dockerOk(['plugin', 'disable', '-f', 'ovsnet']);
  t.ok(await ping('p1', await ip('p2')), 'while disabled');
  await host.dockerOk(['plugin', 'enable', 'ovsnet']);
  await host.dockerOk(['run', '-d', '--name', 'p3', '--network', 'pn', IMAGE, 'sleep', '600']);
  t.ok(await ping('p3', await ip('p1')));
});

t.test('dockerd restarted with the plugin enabled: networks and containers work', async (t) => {
  await host.restartDockerd();
  let up = false;
  for (let i = 0; i < 100 && !up; i++) {
    up =
      (await host.docker(['inspect', '-f', '{{.State.Running}}', 'p1'])).stdout.trim() === 'true' &&
      (await host.docker(['inspect', '-f', '{{.State.Running}}', 'p2'])).stdout.trim() === 'true';
    if (!up) await new Promise((r) => setTimeout(r, 100));
  }
  t.ok(up, 'restart=always containers are back');
  t.match(await host.dockerOk(['plugin', 'ls', '--format', '{{.Name}} {{.Enabled}}']), /ovsnet:latest true/);
  t.ok(await ping('p1', await ip('p2')), 'and talk');
  await host.dockerOk(['run', '-d', '--name', 'p4', '--network', 'pn', IMAGE, 'sleep', '600']);
  t.ok(await ping('p4', await ip('p1')), 'a new container joins');
});
