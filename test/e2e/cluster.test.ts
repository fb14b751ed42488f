/**
 * Three simulated hosts on one underlay with a shared etcd: every ovsnet registers its host,
 * sees the others, and a host killed with SIGKILL is gone from its peers within the TTL.
 * (The first part of the multi-host work, issue 5; its harness is the one the rest will use.)
 */
import fs from 'node:fs';
import t from 'tap';
import { Cluster, MAIN, run, type Ovsnet } from '../harness/host.js';

const cluster = await Cluster.up('clu', 3);
const daemons: Ovsnet[] = [];
let down = false;
t.teardown(async () => {
  if (!down) await cluster.down();
  for (const d of daemons) await d.kill('SIGTERM').catch(() => undefined);
});

const status = async (i: number): Promise<string[]> => {
  const host = cluster.hosts[i];
  if (host === undefined) return [];
  const r = await host.exec(['env', `OVSNET_STORE=${cluster.store}`, process.execPath, MAIN, 'status', '--json']);
  try {
    return ((JSON.parse(r.stdout) as { hosts: string[] }).hosts ?? []).sort();
  } catch {
    return [];
  }
};

t.test('hosts reach each other over the underlay', async (t) => {
  const [a, b] = [cluster.hosts[0], cluster.addresses[1]];
  t.equal((await a?.exec(['busybox', 'ping', '-c', '1', '-W', '2', b ?? '']))?.code, 0);
});

t.test('every ovsnet registers its host and sees the others', async (t) => {
  for (const [i, host] of cluster.hosts.entries()) {
    daemons.push(
      await host.startOvsnet({ OVSNET_STORE: cluster.store, OVSNET_HOST: `h${i + 1}`, OVSNET_VTEP_IP: cluster.addresses[i] ?? '', OVSNET_HOST_TTL: '2' }),
    );
  }
  let seen: string[] = [];
  for (let i = 0; i < 50 && seen.length < 3; i++) {
    seen = await status(0);
    if (seen.length < 3) await new Promise((r) => setTimeout(r, 100));
  }
  t.same(seen, ['h1', 'h2', 'h3']);
});

t.test('a host killed with SIGKILL is gone from its peers within the TTL', async (t) => {
  const killedAt = Date.now();
  await daemons[2]?.kill('SIGKILL');
  let seen = await status(0);
  while (seen.includes('h3') && Date.now() - killedAt < 10_000) {
    await new Promise((r) => setTimeout(r, 200));
    seen = await status(1);
  }
  t.same(seen, ['h1', 'h2']);
  t.ok(Date.now() - killedAt < 2000 + 3000, `gone after ${Date.now() - killedAt} ms (TTL 2 s)`);
});

t.test('down leaves no namespace, directory or etcd of the cluster', async (t) => {
  t.match((await run('ip', ['netns', 'list'])).stdout, new RegExp(cluster.underlay.name));
  await cluster.down();
  down = true;
  const left = (await run('ip', ['netns', 'list'])).stdout;
  for (const name of [cluster.underlay.name, ...cluster.hosts.map((h) => h.name)]) t.notMatch(left, new RegExp(name), `${name} removed`);
  t.notOk(fs.existsSync(cluster.underlay.dir));
  t.notOk(cluster.hosts.some((h) => fs.existsSync(h.dir)), 'host directories removed');
});
