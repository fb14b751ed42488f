/**
 * Holders with a real Docker: a container removed while ovsnet was down leaves its
 * reservation behind (Docker's DeleteEndpoint and ReleaseAddress find no plugin); the restarted
 * ovsnet reaps it (endpoint gone), logs and counts it, and the address serves a new container.
 * A reservation no CreateEndpoint ever bound is reaped; those of a `-d bridge --ipam-driver
 * ovsnet` network (never bound: Docker's driver) are not. `ovsnet ipam adopt docker` keeps the
 * addresses of a network's running containers from being handed out and gives each to its
 * container when it moves over with `--ip`.
 */
import t from 'tap';
import { keys } from '../../src/store/keys.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import type { Reservation } from '../../src/ipam-driver/state/records.js';
import { CREATE_OVSNET, DockerHost, IMAGE, MAIN, must, type Ovsnet, pluginCall } from '../harness/host.js';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const GRACE = 2; // OVSNET_REAP_GRACE: sweeps every second
const host = await DockerHost.up('reap');
const socket = path.join(host.pluginDir, 'ovsnet.sock');
const start = () => host.startOvsnet({ OVSNET_REAP_GRACE: String(GRACE), OVSNET_LOG_LEVEL: 'info' });
let ovsnet: Ovsnet | undefined = await start();
t.teardown(async () => {
  await ovsnet?.kill('SIGTERM');
  await host.down();
});

/** A plugin socket answering every call with an error (ovsnet down), and the calls it got. */
async function failingPlugin(at: string): Promise<{ calls: string[]; close: () => Promise<void> }> {
  const calls: string[] = [];
  const server = http.createServer((req, res) => {
    calls.push((req.url ?? '').slice(1));
    req.resume();
    res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ Err: 'ovsnet is down' }));
  });
  fs.rmSync(at, { force: true });
  await new Promise<void>((resolve) => server.listen(at, resolve));
  return {
    calls,
    close: async () => {
      await new Promise((resolve) => server.close(resolve));
      fs.rmSync(at, { force: true });
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ipOf = async (c: string, net: string) =>
  host.dockerOk(['inspect', '-f', `{{(index .NetworkSettings.Networks "${net}").IPAddress}}`, c]);
const ping = async (from: string, to: string) => (await host.docker(['exec', from, 'ping', '-c', '1', '-W', '2', to])).code === 0;
const metrics = async () => (await host.exec(['wget', '-q', '-O', '-', '-T', '2', 'http://127.0.0.1:9477/metrics'])).stdout;
const ovsnetCli = (...args: string[]) =>
  host.exec(['env', '-i', `PATH=${process.env.PATH ?? ''}`, 'OVSNET_STORE=sqlite:/run/ovsnet/state.db', process.execPath, MAIN, ...args]);

/** This host's reservations in the store, by address. */
async function reservations(): Promise<Map<string, Reservation>> {
  const store = new SqliteStore({ file: host.storeFile });
  try {
    return new Map(
      (await store.list(keys.allAddresses)).kvs.map((kv) => [
        (JSON.parse(kv.value) as Reservation).address,
        JSON.parse(kv.value) as Reservation,
      ]),
    );
  } finally {
    await store.close();
  }
}

/** The pool ID of an ovsnet pool, by its subnet. */
async function poolOf(subnet: string): Promise<string> {
  const store = new SqliteStore({ file: host.storeFile });
  try {
    const pools = (await store.list(keys.pools)).kvs.map((kv) => JSON.parse(kv.value) as { poolId: string; pool: string });
    return pools.find((p) => p.pool === subnet)?.poolId ?? '';
  } finally {
    await store.close();
  }
}

/** Waits until `test` holds, or `ms` pass; returns whether it held. */
async function until(ms: number, test: () => Promise<boolean>): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await test()) return true;
    await sleep(250);
  }
  return test();
}

await t.test('a container removed while ovsnet was down: its address is reaped, logged, counted, and serves again', async (t) => {
  await host.dockerOk(['network', 'create', '-d', 'ovsnet', '--ipam-driver', 'ovsnet', '--subnet', '10.64.0.0/24', 'reapnet']);
  await host.dockerOk(['run', '-d', '--name', 'keep', '--network', 'reapnet', IMAGE, 'sleep', '600']);
  await host.dockerOk(['run', '-d', '--name', 'gone', '--network', 'reapnet', IMAGE, 'sleep', '600']);
  const gone = await ipOf('gone', 'reapnet');
  const keep = await ipOf('keep', 'reapnet');
  t.match((await reservations()).get(gone), { endpoint: /^[0-9a-f]{64}$/ }, 'bound to its endpoint at CreateEndpoint');

  await ovsnet?.kill('SIGTERM');
  ovsnet = undefined;
  // ovsnet is down. With no socket at all Docker retries each call for ~15 s (over a minute for
  // one docker rm); a stand-in answering every call with an error makes it give up at once.
  const down = await failingPlugin(socket);
  const removing = Date.now();
  await host.dockerOk(['rm', '-f', 'gone']); // Docker's Leave, DeleteEndpoint, ReleaseAddress all fail
  t.comment(`docker rm -f while ovsnet was down: ${Date.now() - removing} ms; calls refused: ${down.calls.join(', ')}`);
  t.ok(down.calls.includes('IpamDriver.ReleaseAddress'), 'Docker tried to release the address');
  await down.close();
  t.ok((await reservations()).has(gone), "the reservation outlived the container: Docker's release was lost");

  ovsnet = await start();
  const started = Date.now();
  t.ok(await until(20_000, async () => !(await reservations()).has(gone)), 'reaped after the restart');
  t.comment(`reaped ${Math.round((Date.now() - started) / 100) / 10} s after ovsnet started (grace ${GRACE} s)`);
  t.ok((await reservations()).has(keep), "the running container's address stays");
  // The log line follows the store's change through the daemon's stdout: it may arrive just after.
  const line = new RegExp(
    `"reason":"endpoint gone".*"msg":"released ${gone.replaceAll('.', '\\.')}: its holder docker/endpoint/[0-9a-f]{64} is gone`,
  );
  t.ok(await until(5000, async () => line.test(ovsnet?.log ?? '')), 'logged with its reason and holder');
  t.match(await metrics(), /^ovsnet_ipam_reaped_total\{reason="endpoint gone"\} 1$/m, 'counted');
  // The address serves a new container: asked for by name it was refused while leaked.
  await host.dockerOk(['run', '-d', '--name', 'again', '--network', 'reapnet', '--ip', gone, IMAGE, 'sleep', '600']);
  t.ok(await ping('keep', gone), 'the new holder of the reaped address answers');
  await host.dockerOk(['rm', '-f', 'keep', 'again']);
});

await t.test('a joined endpoint whose end Docker has not moved yet is never reaped; back from its container, it is', async (t) => {
  // A container slow to start (a storm on a loaded host): Join has answered, and its runtime has
  // not yet run the hook that moves the container end in. Docker's calls, replayed.
  const networkId = await host.dockerOk(['network', 'inspect', '-f', '{{.Id}}', 'reapnet']);
  const poolId = await poolOf('10.64.0.0/24');
  const asked = await pluginCall(socket, 'IpamDriver.RequestAddress', { PoolID: poolId, Address: '', Options: null });
  const address = (asked.body as { Address: string }).Address;
  const endpointId = crypto.randomBytes(32).toString('hex');
  const ids = { NetworkID: networkId, EndpointID: endpointId };
  const created = await pluginCall(socket, 'NetworkDriver.CreateEndpoint', { ...ids, Interface: { Address: address }, Options: {} });
  t.equal(created.status, 200, JSON.stringify(created.body));
  const joined = await pluginCall(socket, 'NetworkDriver.Join', { ...ids, SandboxKey: '/var/run/docker/netns/slow', Options: {} });
  t.equal(joined.status, 200, JSON.stringify(joined.body));
  const end = (joined.body as { InterfaceName: { SrcName: string } }).InterfaceName.SrcName;
  const plain = address.split('/')[0] ?? '';
  const endOnHost = async () => (await host.exec(['ip', 'link', 'show', end])).code === 0;

  await sleep((3 * GRACE + 1) * 1000); // three grace periods, a sweep each second
  t.ok(await endOnHost(), `its end ${end} is still on the host for Docker to move, ${3 * GRACE + 1} s after Join`);
  t.equal((await reservations()).get(plain)?.endpoint, endpointId, 'its address still bound to it');
  t.notMatch(ovsnet?.log ?? '', new RegExp(`endpoint ${endpointId.slice(0, 12)} left its container`), 'not taken for one that left');

  // Docker moves it into the container; the container goes, and Docker's Leave and
  // DeleteEndpoint never reach ovsnet: its end is back on the host.
  const ns = `ovsnet-slow-${process.pid}`;
  await must('ip', ['netns', 'add', ns]);
  t.teardown(() => must('ip', ['netns', 'del', ns]).catch(() => undefined));
  await must('ip', ['-n', host.name, 'link', 'set', end, 'netns', ns]);
  await sleep(2500); // two sweeps see it in its container
  t.notOk(await endOnHost(), 'in its container');
  await must('ip', ['-n', ns, 'link', 'set', end, 'netns', host.name]);
  const back = Date.now();
  t.ok(await until((3 * GRACE + 5) * 1000, async () => !(await endOnHost())), 'back on the host, it is removed with its endpoint');
  t.ok(await until(5000, async () => !(await reservations()).has(plain)), 'and its address released');
  t.comment(`removed ${Math.round((Date.now() - back) / 100) / 10} s after its end came back (grace ${GRACE} s)`);
  t.match(ovsnet?.log ?? '', new RegExp(`endpoint ${endpointId.slice(0, 12)} left its container`), 'logged');
});

await t.test("never bound: reaped in ovsnet networks, never in networks of Docker's driver", async (t) => {
  await host.dockerOk(['network', 'create', '-d', 'bridge', '--ipam-driver', 'ovsnet', '--subnet', '10.66.0.0/24', 'bridged']);
  await host.dockerOk(['run', '-d', '--name', 'b1', '--network', 'bridged', IMAGE, 'sleep', '600']);
  await host.dockerOk(['run', '-d', '--name', 'b2', '--network', 'bridged', IMAGE, 'sleep', '600']);
  const b2 = await ipOf('b2', 'bridged');
  // A request whose CreateEndpoint never came (a docker run that failed, its release lost).
  const poolId = await poolOf('10.64.0.0/24');
  const orphan = await pluginCall(socket, 'IpamDriver.RequestAddress', { PoolID: poolId, Address: '', Options: null });
  const address = ((orphan.body as { Address: string }).Address ?? '').split('/')[0] ?? '';
  t.equal(orphan.status, 200, `reserved ${address}`);
  t.ok(await until(15_000, async () => !(await reservations()).has(address)), 'the unbound request is reaped');
  t.match(await metrics(), /^ovsnet_ipam_reaped_total\{reason="never bound"\} 1$/m);
  await sleep((GRACE + 2) * 1000);
  t.ok((await reservations()).has(b2), "a bridge network's container keeps its address (nothing binds it there)");
  t.ok(await ping('b1', b2), 'and its traffic flows');
  await host.dockerOk(['rm', '-f', 'b1', 'b2']);
  await host.dockerOk(['network', 'rm', 'bridged']);
});

await t.test("ovsnet ipam adopt docker: a network moved to ovsnet keeps its containers' addresses", async (t) => {
  await host.dockerOk(['network', 'create', '-d', 'bridge', '--subnet', '10.65.0.0/24', 'old']);
  await host.dockerOk(['run', '-d', '--name', 'mover', '--network', 'old', IMAGE, 'sleep', '600']);
  const mover = await ipOf('mover', 'old');
  const share = 'ovsnet.allow-connected=true'; // the old bridge is still on the subnet while moving
  await host.dockerOk([...CREATE_OVSNET, '--subnet', '10.65.0.0/24', '--ipam-opt', share, '-o', share, 'new']);
  const adopted = await ovsnetCli('ipam', 'adopt', 'docker', 'old', '--json');
  t.equal(adopted.code, 0, adopted.stderr);
  t.match(JSON.parse(adopted.stdout), [{ address: mover, holder: /^adopted\/docker\/[0-9a-f]{64}$/, outcome: 'adopted' }]);
  const listed = await ovsnetCli('ipam', '--reservations', '10.65.0.0/24');
  t.match(listed.stdout, new RegExp(`${mover.replaceAll('.', '\\.')} +static +adopted/docker/[0-9a-f]{64} +reap-`));
  // Newcomers on the new network never get the adopted address...
  await host.dockerOk(['run', '-d', '--name', 'n1', '--network', 'new', IMAGE, 'sleep', '600']);
  t.not(await ipOf('n1', 'new'), mover, 'a newcomer gets another address');
  // ...and the container moving over keeps it.
  await host.dockerOk(['network', 'disconnect', 'old', 'mover']);
  await host.dockerOk(['network', 'connect', '--ip', mover, 'new', 'mover']);
  t.equal(await ipOf('mover', 'new'), mover, 'moved with its address');
  t.ok(await ping('n1', mover), 'and reachable there');
  t.match((await reservations()).get(mover), { endpoint: /^[0-9a-f]{64}$/ }, 'now an ordinary reservation, bound to its endpoint');
  await host.dockerOk(['rm', '-f', 'mover', 'n1']);
  await host.dockerOk(['network', 'rm', 'old', 'new', 'reapnet']);
  t.same([...(await reservations()).keys()], [], 'nothing left reserved');
});
