/**
 * End-to-end IPAM scenarios with a real dockerd: Docker's bridge driver with ovsnet's IPAM.
 * Run once per store backend (ipam-docker.test.ts, ipam-docker-etcd.test.ts).
 */
import type { Test } from 'tap';
import type { Reservation } from '../../src/ipam-driver/state/records.js';
import { keys } from '../../src/store/keys.js';
import type { Store } from '../../src/store/types.js';
import { IMAGE, type DockerHost, type Ovsnet } from '../harness/host.js';

export interface Ctx {
  readonly host: DockerHost;
  readonly store: Store;
  /** The running plugin; scenarios may replace it (restart). */
  ovsnet: Ovsnet;
  restartOvsnet(): Promise<Ovsnet>;
}

const ipOf = async (host: DockerHost, container: string, net: string, v6 = false) =>
  host.dockerOk(['inspect', '-f', `{{(index .NetworkSettings.Networks "${net}").${v6 ? 'GlobalIPv6Address' : 'IPAddress'}}}`, container]);

/** The pool record's id for a subnet, and what the store holds for it. */
export async function poolState(store: Store, subnet: string): Promise<{ poolId: string; count: number; addresses: string[] } | undefined> {
  const pools = (await store.list(keys.pools)).kvs.map((kv) => JSON.parse(kv.value) as { poolId: string; pool: string });
  const p = pools.find((x) => x.pool === subnet);
  if (p === undefined) return undefined;
  const count = Number((await store.get(keys.poolCount(p.poolId)))?.value ?? '0');
  const addresses = (await store.list(keys.addresses(p.poolId))).kvs.map((kv) => (JSON.parse(kv.value) as Reservation).address).sort();
  return { poolId: p.poolId, count, addresses };
}

export async function ipamScenarios(t: Test, ctx: Ctx, opts: { prefix: string; restarts: boolean }): Promise<void> {
  const { host, store } = ctx;
  const o = opts.prefix; // second octet base, so two backends' runs never share subnets
  const net = `${o}.55`;

  await t.test('--subnet --ip-range --gateway --aux-address, --ip, a duplicate --ip, reuse after rm', async (t) => {
    await host.dockerOk([
      'network',
      'create',
      '-d',
      'bridge',
      '--ipam-driver',
      'ovsnet',
      '--subnet',
      `10.${net}.0/24`,
      '--ip-range',
      `10.${net}.128/25`,
      '--gateway',
      `10.${net}.1`,
      '--aux-address',
      `r=10.${net}.2`,
      'n1',
    ]);
    await host.dockerOk(['run', '-d', '--name', 'c1', '--network', 'n1', IMAGE, 'sleep', '600']);
    await host.dockerOk(['run', '-d', '--name', 'c2', '--network', 'n1', IMAGE, 'sleep', '600']);
    t.equal(await ipOf(host, 'c1', 'n1'), `10.${net}.128`);
    t.equal(await ipOf(host, 'c2', 'n1'), `10.${net}.129`);
    await host.dockerOk(['run', '-d', '--name', 'c50', '--network', 'n1', '--ip', `10.${net}.50`, IMAGE, 'sleep', '600']);
    t.equal(await ipOf(host, 'c50', 'n1'), `10.${net}.50`);
    const dup = await host.docker(['run', '--name', 'dup', '--network', 'n1', '--ip', `10.${net}.50`, IMAGE, 'true']);
    t.not(dup.code, 0, 'a second container asking for the same --ip fails');
    t.match(
      dup.stderr,
      new RegExp(`address 10\\.${o}\\.55\\.50 is already in use in pool 10\\.${o}\\.55\\.0/24: reserved by`),
      "ovsnet's message reaches docker run",
    );
    await host.docker(['rm', '-f', 'dup']);
    await host.dockerOk(['rm', '-f', 'c50']);
    await host.dockerOk(['run', '-d', '--name', 'c50b', '--network', 'n1', '--ip', `10.${net}.50`, IMAGE, 'sleep', '600']);
    t.equal(await ipOf(host, 'c50b', 'n1'), `10.${net}.50`, 'the address is reused after docker rm -f');
    const s = await poolState(store, `10.${net}.0/24`);
    t.same(
      s?.addresses,
      [`10.${net}.1`, `10.${net}.128`, `10.${net}.129`, `10.${net}.2`, `10.${net}.50`],
      'gateway, aux, three containers',
    );
    t.equal(s?.count, 5, 'count equals reservations');
  });

  await t.test('a /29 runs out with a message naming the pool and its size', async (t) => {
    await host.dockerOk(['network', 'create', '-d', 'bridge', '--ipam-driver', 'ovsnet', '--subnet', `10.${o}.56.0/29`, 'small']);
    for (let i = 0; i < 5; i++) await host.dockerOk(['run', '-d', '--name', `s${i}`, '--network', 'small', IMAGE, 'sleep', '600']);
    const full = await host.docker(['run', '--name', 's5', '--network', 'small', IMAGE, 'true']);
    t.not(full.code, 0);
    t.match(full.stderr, new RegExp(`no free address in pool 10\\.${o}\\.56\\.0/29: all 6 usable addresses are in use`));
    await host.docker(['rm', '-f', 's5']);
    const s = await poolState(store, `10.${o}.56.0/29`);
    t.equal(s?.count, 6);
    t.equal(s?.addresses.length, 6);
    await host.dockerOk(['rm', '-f', 's0', 's1', 's2', 's3', 's4']);
    await host.dockerOk(['network', 'rm', 'small']);
    t.equal(await poolState(store, `10.${o}.56.0/29`), undefined, 'network rm releases the pool');
  });

  await t.test('networks without --subnet get pools that do not overlap; network rm releases them', async (t) => {
    await host.dockerOk(['network', 'create', '-d', 'bridge', '--ipam-driver', 'ovsnet', 'auto1']);
    await host.dockerOk(['network', 'create', '-d', 'bridge', '--ipam-driver', 'ovsnet', 'auto2']);
    const s1 = await host.dockerOk(['network', 'inspect', '-f', '{{(index .IPAM.Config 0).Subnet}}', 'auto1']);
    const s2 = await host.dockerOk(['network', 'inspect', '-f', '{{(index .IPAM.Config 0).Subnet}}', 'auto2']);
    t.not(s1, s2);
    t.match(s1, /^10\.(19[2-9]|2[0-4]\d|25[0-5])\.\d+\.0\/24$/, 'carved from OVSNET_DEFAULT_POOLS');
    t.ok(await poolState(store, s1));
    await host.dockerOk(['network', 'rm', 'auto1', 'auto2']);
    t.equal(await poolState(store, s1), undefined);
    t.equal(await poolState(store, s2), undefined);
  });

  await t.test('--ipv6 --subnet fd00:55::/64: containers get addresses from it', async (t) => {
    const v6 = `fd00:${o}::/64`;
    await host.dockerOk([
      'network',
      'create',
      '-d',
      'bridge',
      '--ipam-driver',
      'ovsnet',
      '--ipv6',
      '--subnet',
      v6,
      '--subnet',
      `10.${o}.57.0/24`,
      'v6n',
    ]);
    await host.dockerOk(['run', '-d', '--name', 'six', '--network', 'v6n', IMAGE, 'sleep', '600']);
    t.equal(await ipOf(host, 'six', 'v6n', true), `fd00:${o}::2`, 'after the gateway fd00::1');
    const inside = await host.dockerOk(['exec', 'six', 'ip', '-6', 'addr', 'show', 'eth0']);
    t.match(inside, new RegExp(`inet6 fd00:${o}::2/64`));
    await host.dockerOk(['rm', '-f', 'six']);
    await host.dockerOk(['network', 'rm', 'v6n']);
    t.equal(await poolState(store, v6), undefined);
  });

  if (!opts.restarts) return;

  await t.test('ovsnet killed with SIGKILL and restarted between container starts', async (t) => {
    await host.dockerOk(['run', '-d', '--name', 'k1', '--network', 'n1', IMAGE, 'sleep', '600']);
    t.equal(await ctx.ovsnet.kill('SIGKILL'), null, 'killed');
    ctx.ovsnet = await ctx.restartOvsnet();
    await host.dockerOk(['run', '-d', '--name', 'k2', '--network', 'n1', IMAGE, 'sleep', '600']);
    await host.dockerOk(['run', '-d', '--name', 'k3', '--network', 'n1', IMAGE, 'sleep', '600']);
    const ips = await Promise.all(['c1', 'c2', 'c50b', 'k1', 'k2', 'k3'].map((c) => ipOf(host, c, 'n1')));
    t.equal(new Set(ips).size, 6, `no address handed out twice: ${ips.join(' ')}`);
    const s = await poolState(store, `10.${net}.0/24`);
    t.same(s?.addresses, [...ips, `10.${net}.1`, `10.${net}.2`].sort(), 'none lost, none extra');
    t.equal(s?.count, 8);
  });

  await t.test('dockerd restarted: running containers keep their addresses, removed ones are released', async (t) => {
    await host.dockerOk(['run', '-d', '--name', 'keep', '--restart', 'always', '--network', 'n1', IMAGE, 'sleep', '600']);
    await host.dockerOk(['run', '-d', '--rm', '--name', 'gone', '--network', 'n1', IMAGE, 'sleep', '600']);
    const gone = await ipOf(host, 'gone', 'n1');
    await host.restartDockerd();
    // Wait for the restart policy to bring `keep` back.
    let keep = '';
    for (let i = 0; i < 100 && keep === ''; i++) {
      const st = await host.docker(['inspect', '-f', '{{.State.Running}}', 'keep']);
      if (st.stdout.trim() === 'true') keep = await ipOf(host, 'keep', 'n1');
      else await new Promise((r) => setTimeout(r, 100));
    }
    t.not(keep, '', 'keep is running again');
    // dockerd removes --rm containers in the background after its restart.
    for (let i = 0; i < 100 && (await host.docker(['inspect', 'gone'])).code === 0; i++) await new Promise((r) => setTimeout(r, 100));
    t.not((await host.docker(['inspect', 'gone'])).code, 0, 'gone was removed');
    const s = await poolState(store, `10.${net}.0/24`);
    t.ok(s?.addresses.includes(keep), `keep's address ${keep} is reserved`);
    t.notOk(s?.addresses.includes(gone) && gone !== keep, `gone's address ${gone} is released`);
    const running = (await host.dockerOk(['ps', '-q', '--filter', 'network=n1'])).split('\n').filter((x) => x !== '');
    const ips = await Promise.all(running.map((c) => ipOf(host, c, 'n1')));
    t.same(s?.addresses, [...ips, `10.${net}.1`, `10.${net}.2`].sort(), 'the store holds exactly the running containers, gateway and aux');
    t.equal(s?.count, s?.addresses.length, 'count equals reservations');
  });
}
