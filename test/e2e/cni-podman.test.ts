/**
 * A real CNI runtime on an ovsnet network: Debian's podman with its CNI
 * backend, in a simulated host beside that host's Docker. A podman container and a Docker
 * container on one network ping each other and exchange data over TCP; `podman rm -f` releases
 * the address and the OVS port; ovsnet killed in the middle of a podman ADD gives podman a
 * try-again error, and the restarted daemon leaves nothing of it. Prints the CNI ADD latency
 * next to Docker's Join, measured in the same run.
 *
 * podman writes only under the test's directory: --root, --runroot, --tmpdir, file locks and
 * the CNI configuration there; libcni's fixed cache (/var/lib/cni) is kept in the test's
 * directory by running podman in a mount namespace of its own with the test's directory over
 * /var/lib. /run/netns is made a shared mount first, so that the namespaces podman makes there
 * are seen by ovsnet, which runs in the host's mount namespace.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { endpointIdOf } from '../../src/cni/attachments.js';
import { names } from '../../src/driver/model/records.js';
import { DockerHost, IMAGE, MAIN, run, type Ovsnet } from '../harness/host.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const host = await DockerHost.up('cni');
const env = { OVSNET_LOG_LEVEL: 'info' };
let ovsnet: Ovsnet = await host.startOvsnet(env);
const T = path.join(host.dir, 'podman');

t.teardown(async () => {
  await podman(['rm', '-f', '-a', '-t', '0']).catch(() => undefined);
  // Anything podman started and did not stop: its cgroups are under the host's name.
  await run('sh', ['-c', `cat /sys/fs/cgroup/*/${host.name}/libpod-*/cgroup.procs 2>/dev/null | xargs -r kill -9`]);
  await host.down();
  await ovsnet.kill('SIGTERM');
});

/** podman as the test runs it: its own mount namespace, everything under T. */
function podman(args: readonly string[], timeoutMs = 60_000) {
  const flags = ['--root', `${T}/root`, '--runroot', `${T}/runroot`, '--tmpdir', `${T}/tmp`, '--storage-driver', 'vfs'];
  return host.exec([
    'timeout',
    String(Math.ceil(timeoutMs / 1000)),
    'unshare',
    '--mount',
    '--propagation',
    'unchanged',
    'sh',
    '-c',
    `mount --bind ${T}/var-lib /var/lib && exec "$@"`,
    'sh',
    'env',
    `CONTAINERS_CONF=${T}/containers.conf`,
    'podman',
    ...flags,
    ...args,
  ]);
}
const podmanOk = async (args: readonly string[]) => {
  const r = await podman(args);
  if (r.code !== 0) throw new Error(`podman ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
  return r.stdout.trim();
};
const RUN = [
  '--network',
  'shared',
  '--cgroup-parent',
  `/${host.name}`,
  '--ulimit',
  'nofile=1024:1024',
  '--ulimit',
  'nproc=1024:1024',
  '--rootfs',
  `${T}/rootfs`,
];
const used = async () => {
  const r = await host.exec(['env', 'OVSNET_STORE=sqlite:/run/ovsnet/state.db', process.execPath, MAIN, 'ipam', '--json']);
  return (JSON.parse(r.stdout) as { pool: string; used: number }[]).find((p) => p.pool === '10.74.0.0/24')?.used ?? -1;
};
const portOf = async (endpointId: string) =>
  (await host.exec(['ovs-vsctl', '--bare', '--columns=name', 'find', 'Port', `external_ids:ovsnet-endpoint=${endpointId}`])).stdout.trim();
const linkExists = async (name: string) => (await host.exec(['ip', 'link', 'show', name])).code === 0;
const until = async (what: string, ok: () => Promise<boolean>, ms = 20_000) => {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
};

await t.test('setup: an ovsnet network in Docker, podman with the CNI backend and the ovsnet plugin', async () => {
  await host.dockerOk(['network', 'create', '-d', 'ovsnet', '--ipam-driver', 'ovsnet', '--subnet', '10.74.0.0/24', 'shared']);
  for (const d of ['net.d', 'bin', 'root', 'runroot', 'tmp', 'var-lib', 'rootfs/bin', 'rootfs/etc', 'rootfs/tmp'])
    fs.mkdirSync(path.join(T, d), { recursive: true });
  fs.copyFileSync('/bin/busybox', `${T}/rootfs/bin/busybox`);
  fs.chmodSync(`${T}/rootfs/bin/busybox`, 0o755);
  for (const a of ['sh', 'ip', 'ping', 'nc', 'sleep', 'cat']) fs.symlinkSync('busybox', `${T}/rootfs/bin/${a}`);
  await run('bash', [`${root}scripts/cni-install.sh`, `${T}/bin`]);
  // docs/cni.md's example configuration.
  fs.writeFileSync(
    `${T}/net.d/shared.conflist`,
    JSON.stringify({ cniVersion: '1.0.0', name: 'shared', plugins: [{ type: 'ovsnet', network: 'shared' }] }),
  );
  fs.writeFileSync(
    `${T}/containers.conf`,
    `[network]\nnetwork_backend = "cni"\ncni_plugin_dirs = ["${T}/bin"]\nnetwork_config_dir = "${T}/net.d"\n` +
      `[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "none"\nlock_type = "file"\n`,
  );
  // Not `mountpoint -q` first: it sees the machine's /run/netns mount hidden under the host's /run.
  const shared = await host.exec([
    'sh',
    '-c',
    'mkdir -p /run/netns && mount --bind /run/netns /run/netns && mount --make-shared /run/netns',
  ]);
  if (shared.code !== 0) throw new Error(`cannot make /run/netns shared: ${shared.stderr}`);
});

await t.test('a podman container and a Docker container on one network: ping and TCP both ways', async (t) => {
  await podmanOk(['run', '-d', '--name', 'p1', ...RUN, 'sleep', '3600']);
  await host.dockerOk(['run', '-d', '--name', 'd1', '--network', 'shared', IMAGE, 'sleep', '3600']);
  const pip = (await podmanOk(['exec', 'p1', 'ip', '-o', '-4', 'addr', 'show', 'eth0'])).match(/inet (10\.74\.0\.\d+)\//)?.[1] ?? '';
  const dip = await host.dockerOk(['inspect', '-f', '{{.NetworkSettings.Networks.shared.IPAddress}}', 'd1']);
  t.match(pip, /^10\.74\.0\.\d+$/, 'podman container numbered from the network pool');
  t.not(pip, dip);
  t.equal((await podman(['exec', 'p1', 'ping', '-c', '2', '-W', '2', dip])).code, 0, 'podman -> docker ping');
  t.equal((await host.docker(['exec', 'd1', 'ping', '-c', '2', '-W', '2', pip])).code, 0, 'docker -> podman ping');
  // TCP: each side serves once and the other connects; both directions of data checked.
  // A server's input stays open 3 s: busybox nc ends at its input's end, and could close before
  // reading the client's line. What it received is read until it is there (the client can finish
  // first).
  await host.dockerOk(['exec', '-d', 'd1', 'sh', '-c', '(echo from-docker; sleep 3) | nc -l -p 7000 > /tmp/got']);
  await podmanOk(['exec', '-d', 'p1', 'sh', '-c', '(echo from-podman; sleep 3) | nc -l -p 7001 > /tmp/got']);
  await new Promise((r) => setTimeout(r, 500));
  t.equal((await podman(['exec', 'p1', 'sh', '-c', `echo to-docker | nc -w 5 ${dip} 7000`])).stdout.trim(), 'from-docker');
  t.equal((await host.docker(['exec', 'd1', 'sh', '-c', `echo to-podman | nc -w 5 ${pip} 7001`])).stdout.trim(), 'from-podman');
  const got = async (read: () => Promise<string>) => {
    let text = '';
    for (const end = Date.now() + 10_000; Date.now() < end; await new Promise((r) => setTimeout(r, 250))) {
      if ((text = (await read()).trim()) !== '') break;
    }
    return text;
  };
  t.equal(await got(() => host.dockerOk(['exec', 'd1', 'cat', '/tmp/got'])), 'to-docker', 'docker received the podman line');
  t.equal(await got(() => podmanOk(['exec', 'p1', 'cat', '/tmp/got'])), 'to-podman', 'podman received the docker line');
});

await t.test('podman rm -f releases the address and the port', async (t) => {
  const cid = await podmanOk(['inspect', '-f', '{{.Id}}', 'p1']);
  const ep = endpointIdOf(host.name, cid, 'eth0');
  const before = await used();
  t.not(await portOf(ep), '', 'the attachment has an OVS port');
  await podmanOk(['rm', '-f', '-t', '0', 'p1']);
  t.equal(await portOf(ep), '', 'the port is gone');
  t.equal(await used(), before - 1, 'the address is free');
  await until('the veth to go', async () => !(await linkExists(names.hostVeth(ep))));
});

await t.test('CNI ADD next to Docker Join, in this run', async (t) => {
  // The plugin run as podman runs it, in a namespace of the host's: wall time of each ADD.
  const conf = JSON.stringify({ cniVersion: '1.0.0', name: 'shared', type: 'ovsnet', network: 'shared' });
  // One namespace each: every attachment brings a default route.
  const script = `for i in 1 2 3 4 5 6 7; do ip netns add bench$i || exit 1
      s=$(date +%s%N); out=$(echo '${conf}' | CNI_COMMAND=ADD CNI_CONTAINERID=bench$i CNI_NETNS=/run/netns/bench$i CNI_IFNAME=eth0 ${T}/bin/ovsnet) || { echo "$out" >&2; exit 1; }
      e=$(date +%s%N); echo $(( (e - s) / 1000 )); done
    for i in 1 2 3 4 5 6 7; do echo '${conf}' | CNI_COMMAND=DEL CNI_CONTAINERID=bench$i CNI_NETNS=/run/netns/bench$i CNI_IFNAME=eth0 ${T}/bin/ovsnet >&2 || exit 1; ip netns del bench$i; done`;
  const r = await host.exec(['sh', '-c', script]);
  t.equal(r.code, 0, r.stderr);
  for (let i = 0; i < 3; i++) await host.dockerOk(['run', '-d', '--network', 'shared', IMAGE, 'sleep', '600']);
  const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
  const plugin = r.stdout
    .trim()
    .split('\n')
    .map((us) => Number(us) / 1000);
  const lines = ovsnet.log
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg?: string; method?: string; ms?: number });
  const daemonAdd = lines.filter((l) => l.msg === 'CNI attachment added').map((l) => l.ms ?? NaN);
  const docker = (m: string) =>
    p50(lines.filter((l) => l.method === `NetworkDriver.${m}` || l.method === `IpamDriver.${m}`).map((l) => l.ms ?? NaN));
  const [join, create, request] = [docker('Join'), docker('CreateEndpoint'), docker('RequestAddress')];
  t.ok(plugin.length === 7 && join > 0, 'both measured');
  t.comment(
    `CNI ADD p50: ${p50(plugin).toFixed(1)} ms as podman sees it (plugin process, Node start included), ${p50(daemonAdd).toFixed(1)} ms in the daemon; ` +
      `Docker p50: Join ${join.toFixed(1)} ms, RequestAddress + CreateEndpoint + Join ${(join + create + request).toFixed(1)} ms (load ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ')[0] ?? ''})`,
  );
});

await t.test('ovsnet killed in the middle of a podman ADD: podman is told to try again, nothing is left', async (t) => {
  const before = await used();
  const cid = await podmanOk(['create', '--name', 'p3', ...RUN, 'sleep', '3600']);
  const ep = endpointIdOf(host.name, cid, 'eth0');
  // Open vSwitch frozen: the ADD stops at its OVS port, after its address, record and veth.
  const ovsdb = Number(fs.readFileSync(path.join(host.dir, 'ovsdb-server.pid'), 'utf8'));
  process.kill(ovsdb, 'SIGSTOP');
  const started = podman(['start', 'p3']);
  try {
    await until('the ADD to reach Open vSwitch', () => linkExists(names.hostVeth(ep)));
    await ovsnet.kill('SIGKILL');
  } finally {
    process.kill(ovsdb, 'SIGCONT');
  }
  const r = await started;
  t.not(r.code, 0, 'podman start failed');
  t.match(r.stderr, /TRY_AGAIN_LATER: the ovsnet daemon/, 'with the try-again error');
  ovsnet = await host.startOvsnet(env);
  await until('the cut-short ADD to be undone', async () => !(await linkExists(names.hostVeth(ep))) && (await used()) === before);
  t.equal(await portOf(ep), '', 'no OVS port');
  t.equal(await used(), before, 'no address held');
  t.match(ovsnet.log, /CNI ADD cut short before a restart undone/);
  await podmanOk(['rm', '-f', '-t', '0', 'p3']);
});
