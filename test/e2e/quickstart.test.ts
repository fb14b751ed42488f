/**
 * The README's first command (`npm start` = scripts/start.sh) on a host whose Open vSwitch is
 * not running: it starts OVS, then serves the plugin; Docker can use it at once. And the
 * systemd unit is ordered before Docker.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { DockerHost, IMAGE, pluginCall } from '../harness/host.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));

t.test('npm start brings Open vSwitch up and serves the plugin', async (t) => {
  const host = await DockerHost.up('quick');
  // Stop the harness's Open vSwitch: the quick start must start its own.
  for (const f of ['ovs-vswitchd.pid', 'ovsdb-server.pid'])
    process.kill(Number(fs.readFileSync(path.join(host.dir, f), 'utf8')), 'SIGTERM');
  await new Promise((r) => setTimeout(r, 500));
  t.not((await host.exec(['ovs-vsctl', '--timeout=1', 'show'])).code, 0, 'OVS is down');
  fs.mkdirSync(path.join(host.dir, 'ovs-etc'));
  const child = spawn(
    'nsenter',
    [`--net=/run/netns/${host.name}`, `--mount=${host.dir}/mntns`, `--uts=${host.dir}/utsns`, '--', 'bash', `${root}scripts/start.sh`],
    {
      // ovs-ctl's database, system-id and logs in this host's directory, not the machine's /etc and /var/log.
      env: {
        PATH: process.env.PATH ?? '',
        OVS_SYSCONFDIR: path.join(host.dir, 'ovs-etc'),
        OVS_DBDIR: path.join(host.dir, 'ovs-etc'),
        OVS_LOGDIR: path.join(host.dir, 'log'),
        OVSNET_STORE: 'sqlite:/run/ovsnet/state.db',
        CNI_BIN_DIR: path.join(host.dir, 'cni-bin'), // not the machine's /opt/cni/bin
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let log = '';
  child.stdout.on('data', (d: Buffer) => (log += d.toString()));
  child.stderr.on('data', (d: Buffer) => (log += d.toString()));
  // The host first, while ovsnet still answers Docker's removals (a dead plugin socket stalls
  // each Docker call ~15 s); its teardown also stops, by namespace, the OVS daemons the quick
  // start left in it and ovsnet itself.
  t.teardown(async () => {
    await host.down();
    child.kill('SIGTERM');
  });
  const socket = path.join(host.pluginDir, 'ovsnet.sock');
  let up = false;
  for (let i = 0; i < 300 && !up; i++) {
    up =
      fs.existsSync(socket) &&
      (await pluginCall(socket, 'Plugin.Activate').then(
        (r) => r.status === 200,
        () => false,
      ));
    if (!up) await new Promise((r) => setTimeout(r, 100));
  }
  t.ok(up, `the plugin answers:\n${log}`);
  t.match(log, /starting Open vSwitch/);
  t.match(log, /CNI plugin installed: .*cni-bin\/ovsnet/);
  const version = spawnSync(path.join(host.dir, 'cni-bin', 'ovsnet'), { input: '{"cniVersion":"1.0.0"}', env: { CNI_COMMAND: 'VERSION' } });
  t.match(version.stdout.toString(), /"supportedVersions":\[.*"1\.0\.0"/, 'the installed CNI plugin answers VERSION');
  t.equal((await host.exec(['ovs-vsctl', '--timeout=2', 'show'])).code, 0, 'OVS runs');
  await host.dockerOk(['network', 'create', '-d', 'ovsnet', '--ipam-driver', 'ovsnet', '--subnet', '10.71.0.0/24', 'q']);
  await host.dockerOk(['run', '-d', '--name', 'q1', '--network', 'q', IMAGE, 'sleep', '600']);
  await host.dockerOk(['run', '-d', '--name', 'q2', '--network', 'q', IMAGE, 'sleep', '600']);
  t.equal((await host.docker(['exec', 'q1', 'ping', '-c', '1', '-W', '2', '10.71.0.3'])).code, 0, 'containers talk');
});

t.test('the systemd unit starts ovsnet before Docker, after Open vSwitch', async (t) => {
  const unit = fs.readFileSync(`${root}deploy/ovsnet.service`, 'utf8');
  t.match(unit, /^Before=docker\.service$/m);
  t.match(unit, /^After=.*openvswitch-switch\.service/m);
  t.match(unit, /^ExecStart=\/usr\/bin\/node (--\S+ )*\/opt\/ovsnet\/dist\/src\/main\.js serve$/m); // its node flags: test/daemon/launch-flags.test.ts
  t.match(unit, /^Restart=always$/m);
});
