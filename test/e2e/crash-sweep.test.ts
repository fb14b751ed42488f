/**
 * Crash consistency with real Docker: container lifecycles on two ovsnet networks while ovsnet
 * is SIGKILLed inside Docker's calls (the driver's, and the IPAM's requests and releases) and
 * restarted on the same state, as systemd or the managed plugin would. Then every container and
 * both networks are removed and, without another restart of ovsnet (whose reconcile would tidy
 * up), nothing of ovsnet's may be left: no OVS port, no veth carrying its alias, no endpoint
 * record, no address reservation, no tombstone, no file in its temporary directory; and no
 * address was handed out twice meanwhile.
 *
 * Docker's calls go through a proxy (test/helpers/plugin-proxy.ts) that shows which call ovsnet
 * is handling, so that a kill lands inside one. A kill during DeleteEndpoint is what left ports
 * and veths behind: Docker retries the broken call with an empty body, which is refused, and
 * forgets the endpoint; its record went with DeleteNetwork, and the port and veth stayed.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { keys } from '../../src/store/keys.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import { DockerHost, IMAGE, type Ovsnet } from '../harness/host.js';
import { PluginProxy } from '../helpers/plugin-proxy.js';

const LIFECYCLES = 40; // 20 on each network
const KILLS = 10; // inside the driver's calls
const IPAM_KILLS = 3; // as the IPAM's RequestAddress or ReleaseAddress arrives
const LIVE = 3; // containers kept running per network, so that a duplicate address would show
const NO_KILL_FAILURES = 8; // docker run failing with no kill during it, per container

// A seeded generator: a failure can be replayed with the seed it printed.
const seed = Number(process.env.OVSNET_CRASH_SEED ?? Date.now() % 100_000);
let state = seed;
const random = () => {
  state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
  return state / 2 ** 31;
};
t.comment(`seed ${seed} (OVSNET_CRASH_SEED=${seed} replays it)`);

const host = await DockerHost.up('crash');
const realSocket = path.join(host.dir, 'run', 'ovsnet', 'real.sock');
let ovsnet: Ovsnet | undefined;
let restarting: Promise<void> | undefined;
let killing = true; // off for the final removal: ovsnet is not restarted after it
const kills: { during: string; afterMs: number; ipam: boolean }[] = [];

// Kill inside a call of the driver's (more often in those that create or remove veths and
// ports), a random few milliseconds after ovsnet got it; at most one kill in flight. And in
// the IPAM's RequestAddress and ReleaseAddress: a kill as ReleaseAddress arrives falls between
// DeleteEndpoint (which freed the address and left a tombstone) and the release that consumes
// it; one as CreateEndpoint arrives, between RequestAddress and the endpoint's record.
const dockerCall = /^(NetworkDriver\.|IpamDriver\.(RequestAddress|ReleaseAddress)$)/;
const proxy = new PluginProxy(path.join(host.pluginDir, 'ovsnet.sock'), realSocket, (method) => {
  if (!killing || !dockerCall.test(method) || restarting !== undefined || ovsnet === undefined) return;
  const ipam = method.startsWith('IpamDriver.');
  if (kills.filter((k) => k.ipam === ipam).length >= (ipam ? IPAM_KILLS : KILLS)) return;
  const odds = /Join|DeleteEndpoint|Leave/.test(method) ? 0.3 : /ReleaseAddress/.test(method) ? 0.2 : 0.08;
  if (random() > odds) return;
  const afterMs = Math.floor(random() * (ipam ? 3 : 25));
  const victim = ovsnet;
  restarting = (async () => {
    await new Promise((r) => setTimeout(r, afterMs));
    kills.push({ during: proxy.calls().join('+') || `none (${method} answered)`, afterMs, ipam });
    await victim.kill('SIGKILL');
    ovsnet = await startOvsnet();
  })().finally(() => (restarting = undefined));
});
// Its temporary directory of its own (the flow syncs' ovs-ofctl input): killed anywhere, ovsnet leaves nothing there.
const tmp = path.join(host.dir, 'run', 'ovsnet-tmp');
fs.mkdirSync(tmp, { recursive: true });
const startOvsnet = () => host.startOvsnet({ OVSNET_SOCKET: '/run/ovsnet/real.sock', TMPDIR: '/run/ovsnet-tmp' });

await proxy.listen();
t.teardown(async () => {
  await restarting?.catch(() => undefined);
  await proxy.close();
  await host.down();
  await ovsnet?.kill('SIGTERM');
});
ovsnet = await startOvsnet();

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sh = async (args: string[]) => (await host.exec(args)).stdout.trim();

/** Retries what Docker refuses while ovsnet restarts (a user would run it again); bounded. */
async function retried(args: string[], tries = 6): Promise<{ ok: boolean; failures: number }> {
  let failures = 0;
  for (let i = 0; i < tries; i++) {
    const r = await host.docker(args);
    if (r.code === 0) return { ok: true, failures };
    failures++;
    await sleep(500);
  }
  return { ok: false, failures };
}

/** The kills so far, each as the calls it landed in and its delay. */
const killList = () => kills.map((k) => `${k.during} (+${k.afterMs} ms)`).join(', ');

let runFailures = 0;
/** docker run failures with no kill during them: ovsnet's own. */
const unexplained: string[] = [];
let duplicates = 0;
const seenDuplicates: string[] = [];

/** One network's lane: LIFECYCLES / 2 containers, LIVE of them running at any time. */
async function lane(net: string): Promise<void> {
  const live: { name: string; ip: string }[] = [];
  for (let i = 0; i < LIFECYCLES / 2; i++) {
    const name = `${net}-c${i}`;
    // Each failed run, and whether ovsnet was killed during it (the fault injected: a user runs it
    // again) or not (ovsnet's own failure: at most NO_KILL_FAILURES of those, 20 runs in all).
    const failed: string[] = [];
    for (;;) {
      const killsBefore = kills.length;
      const r = await host.docker(['run', '-d', '--name', name, '--network', net, IMAGE, 'sleep', '600']);
      if (r.code === 0) break;
      runFailures++;
      const killed = kills.length > killsBefore || restarting !== undefined;
      const why = `${name}: ${r.stderr.trim().split('\n')[0] ?? ''}`;
      if (!killed) unexplained.push(why);
      await retried(['rm', '-f', name]); // a container Docker created but could not start
      failed.push(`${killed ? 'ovsnet killed during it' : 'no kill'}: ${why}`);
      if (failed.filter((f) => f.startsWith('no kill')).length >= NO_KILL_FAILURES || failed.length >= 20) {
        throw new Error(
          `docker run ${name} failed ${failed.length} times:\n${failed.join('\n')}\nkills so far: ${killList()}${host.logTails()}`,
        );
      }
      await sleep(300);
    }
    const ip = (await host.docker(['inspect', '-f', `{{(index .NetworkSettings.Networks "${net}").IPAddress}}`, name])).stdout.trim();
    const twin = ip === '' ? undefined : live.find((c) => c.ip === ip);
    if (twin !== undefined) {
      duplicates++;
      seenDuplicates.push(`${name} and ${twin.name} both ${ip}`);
    }
    live.push({ name, ip });
    if (live.length > LIVE) {
      const old = live.shift();
      if (old !== undefined && !(await retried(['rm', '-f', old.name])).ok) throw new Error(`docker rm -f ${old.name} kept failing`);
    }
  }
}

await t.test(`${LIFECYCLES} container lifecycles on two networks, ovsnet SIGKILLed inside Docker's calls`, async (t) => {
  for (const [n, subnet] of [
    ['crash1', '10.63.1.0/24'],
    ['crash2', '10.63.2.0/24'],
  ] as const) {
    t.ok((await retried(['network', 'create', '-d', 'ovsnet', '--ipam-driver', 'ovsnet', '--subnet', subnet, n])).ok, `network ${n}`);
  }
  const started = Date.now();
  await Promise.all([lane('crash1'), lane('crash2')]);
  killing = false;
  await restarting;
  t.comment(
    `${LIFECYCLES} lifecycles in ${Math.round((Date.now() - started) / 1000)} s, ${runFailures} docker run refused meanwhile, ${unexplained.length} with no kill during it${unexplained.length > 0 ? `: ${unexplained.join('; ')}` : ''}`,
  );
  t.comment(`${kills.length} kills: ${killList()}`);
  t.ok(kills.length >= 5, `ovsnet was killed ${kills.length} times`);
  t.ok(
    kills.some((k) => k.ipam),
    `at least once as the IPAM's request or release arrived (${kills.filter((k) => k.ipam).length})`,
  );
  t.equal(duplicates, 0, `no address handed out twice ${seenDuplicates.join('; ')}`);

  // Everything removed, ovsnet not restarted again.
  const all = (await host.dockerOk(['ps', '-aq'])).split('\n').filter((x) => x !== '');
  if (all.length > 0) t.ok((await retried(['rm', '-f', ...all])).ok, 'every container removed');
  for (const n of ['crash1', 'crash2']) t.ok((await retried(['network', 'rm', n])).ok, `network ${n} removed`);

  const ports = await sh(['ovs-vsctl', '--bare', '--columns=name', 'find', 'Port', 'external_ids:ovsnet-owner=ovsnet']);
  const aliased = (await sh(['ip', '-o', 'link', 'show'])).split('\n').filter((l) => / alias ovsnet:/.test(l));
  const veths = [...new Set((await sh(['ip', '-o', 'link', 'show'])).match(/ov[hc][0-9a-f]{12}/g))];
  t.comment(`left after removal: ${ports.split(/\s+/).filter((p) => p !== '').length} OVS ports, ${veths.length} veth ends`);
  t.equal(ports, '', 'no OVS port of ovsnet left on the bridge');
  t.same(aliased, [], "no link carrying ovsnet's alias left");
  t.same(veths, [], 'no veth end named as ovsnet names them left');
  t.same(fs.readdirSync(tmp), [], 'nothing in its temporary directory');
  const store = new SqliteStore({ file: host.storeFile });
  t.same((await store.list(`${keys.root}endpoints/`)).kvs, [], 'no endpoint record');
  t.same((await store.list(keys.allAddresses)).kvs, [], 'no address reservation');
  t.same((await store.list(keys.allTombstones)).kvs, [], 'no tombstone (of DeleteEndpoint, for ReleaseAddress)');
  t.same((await store.list(keys.networks)).kvs, [], 'no network record');
  await store.close();
});
