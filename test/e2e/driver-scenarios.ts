/**
 * End-to-end scenarios of the Open vSwitch network driver with a real dockerd and OVS, run once
 * with ovsnet's IPAM and once with Docker's default IPAM (driver-*.test.ts).
 */
import type { Test } from 'tap';
import { keys } from '../../src/store/keys.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import { DockerHost, IMAGE, MAIN, type Ovsnet } from '../harness/host.js';

export interface DriverCtx {
  readonly host: DockerHost;
  ovsnet: Ovsnet;
}

const sleeper = ['sleep', '600'];

export async function driverScenarios(t: Test, ctx: DriverCtx, opts: { ipam: boolean; octet: number }): Promise<void> {
  const { host } = ctx;
  const o = opts.octet;
  const ipamArgs = opts.ipam ? ['--ipam-driver', 'ovsnet'] : [];
  const create = (name: string, subnet: string, extra: string[] = []) =>
    host.dockerOk(['network', 'create', '-d', 'ovsnet', ...ipamArgs, '--subnet', subnet, ...extra, name]);
  const run = (name: string, net: string, extra: string[] = [], cmd = sleeper) =>
    host.dockerOk(['run', '-d', '--name', name, '--network', net, ...extra, IMAGE, ...cmd]);
  const ip = (c: string, net: string) => host.dockerOk(['inspect', '-f', `{{(index .NetworkSettings.Networks "${net}").IPAddress}}`, c]);
  const ping = async (from: string, to: string) => (await host.docker(['exec', from, 'ping', '-c', '1', '-W', '2', to])).code === 0;
  const inHost = async (args: string[]) => (await host.exec(args)).stdout;

  await t.test('two containers on one network: ping and TCP', async (t) => {
    await create('n1', `10.${o}.1.0/24`);
    await run('a1', 'n1');
    await run('a2', 'n1');
    const a2 = await ip('a2', 'n1');
    t.ok(await ping('a1', a2), 'ping');
    await host.dockerOk(['exec', '-d', 'a2', 'sh', '-c', 'sleep 10 | nc -l -p 5000 > /tmp/got']);
    await new Promise((r) => setTimeout(r, 300));
    await host.dockerOk(['exec', 'a1', 'sh', '-c', `head -c 2000000 /dev/zero | nc -w 3 ${a2} 5000`]);
    let got = '';
    for (let i = 0; i < 30 && got !== '2000000'; i++) {
      got = (await host.docker(['exec', 'a2', 'sh', '-c', 'wc -c < /tmp/got'])).stdout.trim();
      if (got !== '2000000') await new Promise((r) => setTimeout(r, 100));
    }
    t.equal(got, '2000000', '2 MB over TCP arrive whole (checksum offload handled)');
    const mtu = await host.dockerOk(['exec', 'a1', 'cat', '/sys/class/net/eth0/mtu']);
    t.equal(mtu, '1500');
    if (opts.ipam) {
      const store = new SqliteStore({ file: host.storeFile });
      const reservations = (await store.list(keys.allAddresses)).kvs.map(
        (kv) => JSON.parse(kv.value) as { address: string; endpoint?: string },
      );
      await store.close();
      const epId = await host.dockerOk(['inspect', '-f', '{{(index .NetworkSettings.Networks "n1").EndpointID}}', 'a2']);
      t.equal(reservations.find((r) => r.address === a2)?.endpoint, epId, "CreateEndpoint bound a2's reservation to its endpoint");
    }
  });

  await t.test('a removed container leaves its veth pair as a spare; the next one runs on it', async (t) => {
    await run('sp1', 'n1');
    await host.dockerOk(['rm', '-f', 'sp1']);
    const spareIndexes = async () => [...(await inHost(['ip', '-o', 'link'])).matchAll(/^(\d+): ovsph\d+@/gm)].map((m) => m[1] ?? '');
    let spares: string[] = [];
    for (let i = 0; i < 30 && spares.length === 0; i++) {
      spares = await spareIndexes();
      if (spares.length === 0) await new Promise((r) => setTimeout(r, 100));
    }
    t.not(spares.length, 0, 'a spare pair is kept (OVSNET_SPARE_VETHS)');
    await run('sp2', 'n1');
    const epId = await host.dockerOk(['inspect', '-f', '{{(index .NetworkSettings.Networks "n1").EndpointID}}', 'sp2']);
    const index = /^(\d+):/.exec(await inHost(['ip', '-o', 'link', 'show', `ovh${epId.slice(0, 12)}`]))?.[1];
    t.ok(index !== undefined && spares.includes(index), "sp2's veth is a spare renamed, not a new pair");
    const mac = await host.dockerOk(['inspect', '-f', '{{(index .NetworkSettings.Networks "n1").MacAddress}}', 'sp2']);
    t.equal(await host.dockerOk(['exec', 'sp2', 'cat', '/sys/class/net/eth0/address']), mac, 'with its own MAC');
    t.ok(await ping('sp2', await ip('a2', 'n1')), 'ping a container');
    t.ok(await ping('sp2', `10.${o}.1.1`), 'ping the gateway');
    await host.dockerOk(['rm', '-f', 'sp2']);
  });

  await t.test('containers on two networks cannot reach each other', async (t) => {
    await create('n2', `10.${o}.2.0/24`);
    await run('b1', 'n2');
    t.notOk(await ping('b1', await ip('a1', 'n1')), 'n2 -> n1 blocked');
    t.notOk(await ping('a1', await ip('b1', 'n2')), 'n1 -> n2 blocked');
    const tags = await inHost(['ovs-vsctl', '--columns=name,tag', 'find', 'Port', 'external_ids:ovsnet-role=gateway']);
    t.match(tags, /tag\s+:\s+1\b/);
    t.match(tags, /tag\s+:\s+2\b/, 'each network its own VLAN tag');
  });

  await t.test('--ip, -o ovsnet.tag, an MTU, and option errors', async (t) => {
    await run('c1', 'n1', ['--ip', `10.${o}.1.77`]);
    t.equal(await ip('c1', 'n1'), `10.${o}.1.77`);
    t.ok(await ping('a1', `10.${o}.1.77`));
    await create('n3', `10.${o}.3.0/24`, ['-o', 'ovsnet.tag=300', '-o', 'com.docker.network.driver.mtu=1400']);
    await run('d1', 'n3');
    t.equal(await host.dockerOk(['exec', 'd1', 'cat', '/sys/class/net/eth0/mtu']), '1400', 'MTU set on the container end');
    t.match(
      await inHost([
        'ovs-vsctl',
        'get',
        'Port',
        `ovg${(await host.dockerOk(['network', 'inspect', '-f', '{{.Id}}', 'n3'])).slice(0, 12)}`,
        'tag',
      ]),
      /^300/,
    );
    const dup = await host.docker([
      'network',
      'create',
      '-d',
      'ovsnet',
      ...ipamArgs,
      '--subnet',
      `10.${o}.4.0/24`,
      '-o',
      'ovsnet.tag=300',
      'n4',
    ]);
    t.not(dup.code, 0);
    t.match(dup.stderr, /VLAN tag 300 is used by network [0-9a-f]{12} on this host: pick another from 1 to 4094/);
    const bad = await host.docker([
      'network',
      'create',
      '-d',
      'ovsnet',
      ...ipamArgs,
      '--subnet',
      `10.${o}.5.0/24`,
      '-o',
      'ovsnet.color=blue',
      'n5',
    ]);
    t.match(bad.stderr, /-o ovsnet\.color is not an ovsnet option; valid ones: ovsnet\.tag \(a VLAN tag from 1 to 4094/);
    const vx = await host.docker([
      'network',
      'create',
      '-d',
      'ovsnet',
      ...ipamArgs,
      '--subnet',
      `10.${o}.6.0/24`,
      '-o',
      'ovsnet.encap=vxlan',
      'n6',
    ]);
    t.match(vx.stderr, /-o ovsnet\.encap=vxlan needs -o ovsnet\.network=NAME/);
    t.equal((await host.docker(['network', 'inspect', 'n4'])).code, 1, 'a refused network is not left behind');
  });

  await t.test('--internal: peers reachable, no way out', async (t) => {
    await create('int', `10.${o}.7.0/24`, ['--internal']);
    await run('i1', 'int');
    await run('i2', 'int');
    t.ok(await ping('i1', await ip('i2', 'int')), 'peers');
    t.notMatch(await host.dockerOk(['exec', 'i1', 'ip', 'route']), /default/, 'no default route');
    t.notOk(await ping('i1', `10.${o}.1.1`), "no way to another network's gateway");
  });

  await t.test('-p 8080:80 is reachable from the host', async (t) => {
    await run(
      'web',
      'n1',
      ['-p', '8080:80'],
      ['sh', '-c', 'while true; do printf "HTTP/1.0 200 OK\\r\\n\\r\\nhello from ovsnet" | nc -l -p 80; done'],
    );
    let body = '';
    for (let i = 0; i < 20 && body === ''; i++) {
      body = await inHost(['wget', '-q', '-O', '-', '-T', '2', `http://10.${o}.1.1:8080/`]);
      if (body === '') await new Promise((r) => setTimeout(r, 100));
    }
    t.equal(body, 'hello from ovsnet');
    t.match(await inHost(['iptables', '-t', 'nat', '-S', 'OVSNET-DNAT']), /--dport 8080 .* --to-destination [\d.]+:80/);
    await host.dockerOk(['rm', '-f', 'web']);
    t.notMatch(await inHost(['iptables', '-t', 'nat', '-S', 'OVSNET-DNAT']), /--dport 8080/, 'removed with the container');
  });

  await t.test('network connect and disconnect on a running container', async (t) => {
    await host.dockerOk(['network', 'connect', 'n2', 'a1']);
    t.ok(await ping('a1', await ip('b1', 'n2')), 'reaches n2 once connected');
    await host.dockerOk(['network', 'disconnect', 'n2', 'a1']);
    t.notOk(await ping('a1', await ip('b1', 'n2')), 'not after disconnect');
    t.notMatch(await host.dockerOk(['exec', 'a1', 'ip', 'link']), /eth1/);
  });

  await t.test('20 containers started in parallel all reach each other', async (t) => {
    await create('many', `10.${o}.8.0/24`);
    const names = Array.from({ length: 20 }, (_, i) => `m${i}`);
    await Promise.all(names.map((n) => run(n, 'many')));
    const ips = await Promise.all(names.map((n) => ip(n, 'many')));
    t.equal(new Set(ips).size, 20, 'distinct addresses');
    // Each pings the next (a ring) and the first pings everyone.
    const ring = await Promise.all(names.map((n, i) => ping(n, ips[(i + 1) % 20] ?? '')));
    const star = await Promise.all(ips.slice(1).map((a) => ping('m0', a)));
    t.same([...ring, ...star].filter((x) => !x).length, 0, 'every ping answered');
  });

  await t.test("the operator's CLI shows the daemon's real state", async (t) => {
    const cli = async (args: string[]) => {
      // No settings given: the CLI asks the running daemon for its store (sqlite:/run/ovsnet/state.db here).
      const r = await host.exec([process.execPath, MAIN, ...args]);
      return { code: r.code, out: r.stdout, err: r.stderr };
    };
    const nets = JSON.parse((await cli(['networks', '--json'])).out) as {
      network: string;
      name: string;
      tag: number;
      endpoints: number;
      subnets: string[];
    }[];
    const many = nets.find((n) => n.subnets.includes(`10.${o}.8.0/24`));
    t.equal(many?.endpoints, 20, 'networks: the 20 endpoints of "many"');
    t.equal(many?.network, (await host.dockerOk(['network', 'inspect', '-f', '{{.Id}}', 'many'])).slice(0, 12));
    t.equal(many?.name, 'many', "Docker's name beside the ID");
    t.match((await cli(['networks'])).out, /^[0-9a-f]{12}\s+many\s/m, 'in the table too');
    const eps = JSON.parse((await cli(['endpoints', '-o', 'json'])).out) as { address: string; port: string; container: string }[];
    t.ok(
      eps.some((e) => e.address.startsWith(`10.${o}.8.`) && /^ovh[0-9a-f]{12}$/.test(e.port)),
      'endpoints with their OVS port',
    );
    t.ok(
      eps.some((e) => e.address.startsWith(`10.${o}.8.`) && e.container !== ''),
      "endpoints with their container's name",
    );
    if (opts.ipam) {
      const pools = JSON.parse((await cli(['ipam', '--json'])).out) as { pool: string; used: number; usable: string }[];
      t.match(
        pools.find((p) => p.pool === `10.${o}.8.0/24`),
        { used: 21, usable: '254' },
        'ipam: 20 containers and the gateway of 254',
      );
    }
    const doc = await cli(['doctor']);
    t.equal(doc.code, 0, `doctor finds nothing wrong:\n${doc.out}${doc.err}`);
    t.match(doc.out, /daemon\s+ok\s+ovsnet \d+\.\d+\.\d+ answers on \/run\/docker\/plugins\/ovsnet\.sock/);
    t.match(doc.out, /settings\s+ok\s+from the daemon on \/run\/docker\/plugins\/ovsnet\.sock/);
    t.match(doc.out, /openflow\s+ok\s+ovsnet0 is fail_mode=secure and holds exactly ovsnet's flows and meters/, 'OVS and ovsnet agree');
    t.match(JSON.parse((await cli(['status', '--json'])).out), { daemon: { answers: true, store: { ok: true } } });
  });

  await t.test('Prometheus metrics after real Docker calls', async (t) => {
    const text = await inHost(['wget', '-q', '-O', '-', '-T', '3', 'http://127.0.0.1:9477/metrics']);
    const value = (re: RegExp) => Number(re.exec(text)?.[1] ?? NaN);
    t.ok(
      value(/ovsnet_docker_call_duration_seconds_count\{method="NetworkDriver\.Join",code="200"\} (\d+)/) >= 20,
      'Join latency histogram',
    );
    t.ok(value(/ovsnet_errors_total\{kind="Conflict",code="TAG_TAKEN"\} (\d+)/) >= 1, 'errors by kind and code');
    // The standard names stock dashboards read, and the build's facts.
    t.match(text, /^process_cpu_seconds_total \d/m, 'process_* under its standard name');
    t.match(text, /^nodejs_eventloop_lag_seconds \d/m, 'nodejs_* under its standard name');
    t.notMatch(text, /^ovsnet_(process|nodejs)_/m, 'not renamed');
    t.match(text, /^ovsnet_build_info\{version="\d+\.\d+\.\d+",nodejs="v[\d.]+"\} 1$/m, 'build info');
    t.ok(value(/ovsnet_store_request_duration_seconds_count\{op="txn",outcome="ok"\} (\d+)/) > 0, 'store round trips');
    t.ok(value(/ovsnet_ovsdb_request_duration_seconds_count\{method="transact",outcome="ok"\} (\d+)/) > 0, 'OVSDB round trips');
    if (opts.ipam) {
      t.equal(value(new RegExp(`ovsnet_ipam_pool_used\\{pool="10\\.${o}\\.8\\.0/24"\\} (\\d+)`)), 21, 'pool use');
      t.equal(value(new RegExp(`ovsnet_ipam_pool_size\\{pool="10\\.${o}\\.8\\.0/24"\\} (\\d+)`)), 254, 'pool size');
    }
  });

  await t.test('ovsnet killed with SIGKILL and restarted while containers run', async (t) => {
    const a2 = await ip('a2', 'n1');
    await ctx.ovsnet.kill('SIGKILL');
    t.ok(await ping('a1', a2), 'containers still talk while the plugin is down');
    // Damage while it is down: the gateway port of n1 and its masquerade rule go.
    const gw = `ovg${(await host.dockerOk(['network', 'inspect', '-f', '{{.Id}}', 'n1'])).slice(0, 12)}`;
    await host.exec(['ovs-vsctl', 'del-port', gw]);
    const masq = (await inHost(['iptables', '-t', 'nat', '-S', 'OVSNET-POSTROUTING'])).split('\n').find((l) => l.includes(gw));
    if (masq !== undefined) await host.exec(['iptables', '-t', 'nat', ...masq.replace(/^-A/, '-D').split(' ')]);
    t.notOk(await ping('a1', `10.${o}.1.1`), 'the gateway is gone');
    const doc = await host.exec(['env', 'OVSNET_STORE=sqlite:/run/ovsnet/state.db', process.execPath, MAIN, 'doctor']);
    t.equal(doc.code, 1, 'doctor sees the problem');
    t.match(
      doc.stdout,
      /daemon\s+FAIL\s+nothing answers on \/run\/docker\/plugins\/ovsnet\.sock\s+start it: `ovsnet serve`/,
      'and says how to fix it',
    );
    ctx.ovsnet = await host.startOvsnet();
    t.ok(await ping('a1', a2), 'and after it is back');
    let back = false;
    for (let i = 0; i < 30 && !back; i++) back = await ping('a1', `10.${o}.1.1`);
    t.ok(back, 'reconcile at start recreated the gateway port and its address');
    t.match(await inHost(['iptables', '-t', 'nat', '-S', 'OVSNET-POSTROUTING']), new RegExp(`! -o ${gw} .*MASQUERADE`), 'and its NAT rule');
    await run('late', 'n1');
    t.ok(await ping('late', a2), 'new containers start and talk');
  });

  await t.test('ovsnet stopped with SIGTERM after veths came and went: a clean exit', async (t) => {
    await run('brief', 'n1');
    await host.dockerOk(['rm', '-f', 'brief']); // veths made and deleted on the link worker
    t.equal(await ctx.ovsnet.kill('SIGTERM'), 0, 'exit status 0 (the link worker closes its netlink sockets first)');
    ctx.ovsnet = await host.startOvsnet();
  });

  await t.test('dockerd restarted: ports of containers that died with it are cleaned up', async (t) => {
    const epId = await host.dockerOk(['inspect', '-f', '{{(index .NetworkSettings.Networks "n1").EndpointID}}', 'late']);
    const port = `ovh${epId.slice(0, 12)}`;
    t.match(await inHost(['ovs-vsctl', 'list-ports', 'ovsnet0']), new RegExp(port));
    await host.restartDockerd();
    // Docker activates ovsnet again on first use; that triggers the cleanup.
    await run('after', 'n1');
    let ports = '';
    for (let i = 0; i < 50; i++) {
      ports = await inHost(['ovs-vsctl', 'list-ports', 'ovsnet0']);
      if (!ports.includes(port)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    t.notMatch(ports, new RegExp(port), "the dead container's port is gone");
    const store = new SqliteStore({ file: host.storeFile });
    t.equal(
      await store.get(keys.endpoint(await host.dockerOk(['network', 'inspect', '-f', '{{.Id}}', 'n1']), epId)),
      undefined,
      'and its record',
    );
    await store.close();
    t.ok(await ping('after', `10.${o}.1.1`), 'the network and its gateway work after the restart');
  });

  await t.test('docker network rm leaves no port, tag or NAT rule behind', async (t) => {
    const ids: Record<string, string> = {};
    for (const n of ['n1', 'n2', 'n3', 'int', 'many'])
      ids[n] = (await host.dockerOk(['network', 'inspect', '-f', '{{.Id}}', n])).slice(0, 12);
    const all = (await host.dockerOk(['ps', '-aq'])).split('\n').filter((x) => x !== '');
    await host.dockerOk(['rm', '-f', ...all]);
    await host.dockerOk(['network', 'rm', 'n1', 'n2', 'n3', 'int', 'many']);
    const ports = await inHost(['ovs-vsctl', 'list-ports', 'ovsnet0']);
    t.equal(ports.trim(), '', 'no port on the bridge');
    t.equal((await inHost(['ip', '-o', 'link'])).match(/ov[hcg][0-9a-f]{12}/g), null, 'no veth or gateway device');
    const nat = (await inHost(['iptables-save'])).split('\n').filter((l) => Object.values(ids).some((id) => l.includes(id)));
    t.same(nat, [], 'no NAT or forward rule of these networks');
    const store = new SqliteStore({ file: host.storeFile });
    t.same((await store.list(keys.tags)).kvs, [], 'no VLAN tag held');
    t.same((await store.list(keys.networks)).kvs, [], 'no network record');
    t.same((await store.list(`${keys.root}endpoints/`)).kvs, [], 'no endpoint record');
    await store.close();
  });
}

/** One test file's whole run: its own host with ovsnet inside, the scenarios, teardown. */
export async function driverTestFile(t: Test, opts: { ipam: boolean; octet: number }): Promise<void> {
  const host = await DockerHost.up(opts.ipam ? 'drvovs' : 'drvdef');
  const ctx: DriverCtx = { host, ovsnet: await host.startOvsnet() };
  t.teardown(async () => {
    await host.down();
    await ctx.ovsnet.kill('SIGTERM');
  });
  await driverScenarios(t, ctx, opts);
}
