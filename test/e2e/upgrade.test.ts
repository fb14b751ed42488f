/**
 * The systemd install's upgrade, as docs/upgrading.md says it: stop the
 * service, replace /opt/ovsnet with the new build, start it. Here from the previous version (this
 * repository at the commit before package.json took the current version, built aside) to this
 * one, on one store, with containers running: they keep talking through it, the new version sees
 * the old one's networks and endpoints, new containers join, old ones leave cleanly.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { VERSION } from '../../src/lib/version.js';
import { DockerHost, IMAGE, MAIN, run } from '../harness/host.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const git = (...args: string[]) => execFileSync('git', ['-C', root, ...args], { encoding: 'utf8' }).trim();
// The commit that made package.json say this version; its parent is the previous version.
const bump = git('log', '-1', '--format=%H', `-S"version": "${VERSION}"`, '--', 'package.json');
if (bump === '') throw new Error(`no commit sets package.json's version to ${VERSION}: is this clone shallow?`);
const old = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-old-'));
execFileSync('sh', ['-c', `git -C ${root} archive ${bump}^ | tar -x -C ${old}`]);
fs.symlinkSync(fs.realpathSync(path.join(root, 'node_modules')), path.join(old, 'node_modules'));
const build = await run('npx', ['tsc', '-p', path.join(old, 'tsconfig.json')], { timeoutMs: 300_000 });
if (build.code !== 0) throw new Error(`building the previous version failed:\n${build.stdout}${build.stderr}`);
const oldVersion = (JSON.parse(fs.readFileSync(path.join(old, 'package.json'), 'utf8')) as { version: string }).version;

const host = await DockerHost.up('upgr');
let daemon = await host.startOvsnet({ OVSNET_LOG_LEVEL: 'info' }, path.join(old, 'dist', 'src', 'main.js'));
t.teardown(async () => {
  await host.down();
  await daemon.kill('SIGTERM');
  fs.rmSync(old, { recursive: true, force: true });
});

const ip = (c: string) => host.dockerOk(['inspect', '-f', '{{(index .NetworkSettings.Networks "up").IPAddress}}', c]);
const ping = async (from: string, to: string) => (await host.docker(['exec', from, 'ping', '-c', '1', '-W', '2', to])).code === 0;

t.test(`the previous version (${oldVersion}) serves: a network, two containers`, async (t) => {
  t.not(oldVersion, VERSION, `upgrading from ${oldVersion} to ${VERSION}`);
  await host.dockerOk(['network', 'create', '-d', 'ovsnet', '--ipam-driver', 'ovsnet', '--subnet', '10.72.0.0/24', 'up']);
  for (const c of ['u1', 'u2']) await host.dockerOk(['run', '-d', '--name', c, '--network', 'up', IMAGE, 'sleep', '600']);
  t.ok(await ping('u1', await ip('u2')));
});

t.test('stop, replace, start: connectivity kept throughout, state kept, new containers join', async (t) => {
  const u2 = await ip('u2');
  // A ping every 0.2 s through the whole upgrade: none may be lost for long.
  const pinger = host.docker(['exec', 'u1', 'ping', '-c', '60', '-i', '0.2', '-W', '1', u2], 120_000);
  await new Promise((r) => setTimeout(r, 1000));
  t.equal(await daemon.kill('SIGTERM'), 0, 'the old version stops cleanly (systemctl stop)');
  daemon = await host.startOvsnet({ OVSNET_LOG_LEVEL: 'info' }, MAIN);
  t.match(daemon.log, new RegExp(`ovsnet ${VERSION.replace(/\./g, '\\.')} serving`), 'the new version serves');
  const pings = await pinger;
  const received = Number(/(\d+) packets received/.exec(pings.stdout)?.[1] ?? 0);
  t.ok(received >= 58, `pings through the upgrade: ${received} of 60 answered`);
  const nets = await host.exec([process.execPath, MAIN, 'networks', '-o', 'json']);
  t.match(
    JSON.parse(nets.stdout),
    [{ name: 'up', subnets: ['10.72.0.0/24'], endpoints: 2 }],
    "the old version's network and endpoints, as the new one reads them",
  );
  t.ok(await ping('u1', u2), 'still talking');
  await host.dockerOk(['run', '-d', '--name', 'u3', '--network', 'up', IMAGE, 'sleep', '600']);
  t.equal(await ip('u3'), '10.72.0.4', 'the next address: the old reservations are kept');
  t.ok(await ping('u3', await ip('u1')), 'a new container reaches an old one');
  await host.dockerOk(['rm', '-f', 'u1', 'u2', 'u3']);
  await host.dockerOk(['network', 'rm', 'up']);
  t.equal((await host.exec(['ovs-vsctl', 'list-ports', 'ovsnet0'])).stdout.trim(), '', 'the old containers left cleanly: no port left');
});
