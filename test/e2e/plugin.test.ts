/**
 * The managed plugin: built by `npm run plugin:build` with no registry, installed with
 * `docker plugin create` + `enable`, used as `-d ovsnet:latest --ipam-driver ovsnet:latest`,
 * through disable -f / enable and a dockerd restart. It sees of the host only its own state
 * directory and, read-only, its secrets directory: never /var/lib (and /var/lib/docker in it).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { DockerHost, IMAGE, run } from '../harness/host.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-plugin-'));
const build = await run('bash', [`${root}scripts/plugin-build.sh`, dir], { timeoutMs: 600_000 });
if (build.code !== 0) throw new Error(`plugin:build failed:\n${build.stderr}`);
const host = await DockerHost.up('plugin');
t.teardown(async () => {
  await host.down();
  fs.rmSync(dir, { recursive: true, force: true });
});

const ping = async (from: string, to: string) => (await host.docker(['exec', from, 'ping', '-c', '1', '-W', '2', to])).code === 0;
const ip = (c: string) => host.dockerOk(['inspect', '-f', '{{(index .NetworkSettings.Networks "pn").IPAddress}}', c]);

const stateDir = path.join(host.dir, 'plugin-state');
const secretsDir = path.join(host.dir, 'plugin-secrets');

t.test('install: create, point its state and secrets at this host, enable', async (t) => {
  t.match(build.stdout, /^managed plugin ovsnet \d+\.\d+\.\d+ \(Node [\d.]+\) in .*: docker plugin create ovsnet:\d+\.\d+ /m);
  await host.dockerOk(['plugin', 'create', 'ovsnet', dir]);
  // Both mount sources are settable: this host's own directories, not the machine's.
  fs.mkdirSync(stateDir, { mode: 0o700 });
  fs.mkdirSync(secretsDir, { mode: 0o700 });
  fs.writeFileSync(path.join(secretsDir, 'etcd-password'), 'unused\n', { mode: 0o600 });
  await host.dockerOk(['plugin', 'set', 'ovsnet', `state.source=${stateDir}`, `secrets.source=${secretsDir}`]);
  await host.dockerOk(['plugin', 'enable', 'ovsnet']);
  t.match(await host.dockerOk(['plugin', 'ls', '--format', '{{.Name}} {{.Enabled}}']), /ovsnet:latest true/);
});

/** The plugin's process, found by the plugin's ID in its cgroup. */
async function pluginPid(): Promise<string> {
  const id = (await host.dockerOk(['plugin', 'inspect', '-f', '{{.Id}}', 'ovsnet'])).trim();
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (
        fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8').includes(id) &&
        fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('main.js')
      ) {
        return pid;
      }
    } catch {
      // gone meanwhile
    }
  }
  throw new Error(`no process of plugin ${id}`);
}

t.test('the plugin sees its state directory and, read-only, its secrets: not /var/lib, not /var/lib/docker', async (t) => {
  const mounts = JSON.parse(await host.dockerOk(['plugin', 'inspect', '-f', '{{json .Settings.Mounts}}', 'ovsnet'])) as {
    Name: string;
    Source: string;
    Destination: string;
    Options: string[];
  }[];
  t.same(
    mounts.map((m) => [m.Name, m.Source, m.Destination, m.Options]),
    [
      ['ovs', '/var/run/openvswitch', '/var/run/openvswitch', ['rbind']],
      ['state', stateDir, '/var/lib/ovsnet', ['rbind', 'rw']],
      ['secrets', secretsDir, '/etc/ovsnet', ['rbind', 'ro']],
      ['docker', '/var/run/docker.sock', '/var/run/docker.sock', ['rbind']],
    ],
    "docker plugin inspect: the OVSDB socket, a state directory, a read-only secrets directory, Docker's socket (read for swarm VIPs)",
  );
  t.notOk(
    mounts.some((m) => '/var/lib/docker/'.startsWith(`${m.Source.replace(/\/$/, '')}/`)),
    'no mount holds /var/lib/docker',
  );
  // What the plugin's own process sees, through its root.
  const root = `/proc/${await pluginPid()}/root`;
  t.notOk(fs.existsSync(`${root}/var/lib/docker`), 'no /var/lib/docker in the plugin');
  t.same(fs.readdirSync(`${root}/var/lib`), ['ovsnet'], 'its /var/lib holds its state directory only');
  t.equal(fs.readFileSync(`${root}/etc/ovsnet/etcd-password`, 'utf8'), 'unused\n', 'the secrets are there');
  t.throws(() => fs.writeFileSync(`${root}/etc/ovsnet/written-by-plugin`, 'x'), { code: 'EROFS' }, 'and read-only');
  t.notOk(fs.existsSync(path.join(secretsDir, 'written-by-plugin')));
});

t.test('a network of the managed plugin: two containers talk', async (t) => {
  await host.dockerOk(['network', 'create', '-d', 'ovsnet:latest', '--ipam-driver', 'ovsnet:latest', '--subnet', '10.70.0.0/24', 'pn']);
  await host.dockerOk(['run', '-d', '--restart', 'always', '--name', 'p1', '--network', 'pn', IMAGE, 'sleep', '600']);
  await host.dockerOk(['run', '-d', '--restart', 'always', '--name', 'p2', '--network', 'pn', IMAGE, 'sleep', '600']);
  t.equal(await ip('p1'), '10.70.0.2', "ovsnet's IPAM");
  t.ok(await ping('p1', await ip('p2')));
  const db = path.join(stateDir, 'state.db');
  t.ok(fs.existsSync(db), 'state in the mounted directory');
  t.equal((fs.statSync(db).mode & 0o777).toString(8), '600', 'readable by root only');
});

t.test(
  "the CLI on the host without docker exec: deploy/ovsnet-cli runs it from the plugin's rootfs, finding the plugin through Docker",
  async (t) => {
    // The launcher as installed on a host: found in the plugin's rootfs, run from the host (this host's namespaces).
    const root = (await host.exec(['docker', 'info', '-f', '{{.DockerRootDir}}'])).stdout.trim();
    const id = (await host.dockerOk(['plugin', 'inspect', '-f', '{{.Id}}', 'ovsnet'])).trim();
    const launcher = `${root}/plugins/${id}/rootfs/app/deploy/ovsnet-cli`;
    const cli = (args: string[]) => host.exec(['sh', launcher, ...args]);
    const v = await cli(['version', '-o', 'json']);
    t.equal(v.code, 0, v.stderr);
    t.match(JSON.parse(v.stdout), {
      client: { version: /^\d+\.\d+\.\d+$/ },
      daemon: { socket: `/run/docker/plugins/${id}/ovsnet.sock`, via: 'managed plugin ovsnet:latest', store: { ok: true } },
    });
    // Its store is the plugin's /var/lib/ovsnet/state.db: on the host, in the state mount's source.
    const nets = await cli(['networks', '-o', 'json']);
    t.equal(nets.code, 0, nets.stderr);
    t.match(JSON.parse(nets.stdout), [{ name: 'pn', subnets: ['10.70.0.0/24'], endpoints: 2 }], "the plugin's network, with Docker's name");
    const status = await cli(['status']);
    t.equal(status.code, 0, `${status.stdout}${status.stderr}`);
    t.match(
      status.stdout,
      new RegExp(
        `^settings\\s+ok\\s+from the daemon on /run/docker/plugins/${id}/ovsnet\\.sock \\(managed plugin ovsnet:latest\\); store sqlite:${stateDir}/state\\.db`,
        'm',
      ),
    );
    t.match(status.stdout, /^docker\s+ok\s+Docker lists ovsnet:latest among its network drivers/m);
  },
);

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
