/**
 * A container's way out, end to end on the userspace datapath (the harness's hosts have no
 * openvswitch module), and the subnets Docker may hand the driver.
 *
 * "Outside" is a namespace this test makes, joined to the simulated host by a veth: the host
 * routes 198.19.0.0/24 to it, and it has no route back to container subnets, so only traffic
 * masqueraded to the host's 198.18.0.1 gets an answer.
 */
import t from 'tap';
import { DockerHost, IMAGE, run, type Ovsnet } from '../harness/host.js';

const FAR = '198.19.0.10';

async function ipOk(args: string[]): Promise<string> {
  const r = await run('ip', args);
  if (r.code !== 0) throw new Error(`ip ${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout.trim();
}

const host = await DockerHost.up('drvegr');
const outside = `${host.name}-o`;
const ovsnet: Ovsnet = await host.startOvsnet();
t.teardown(async () => {
  await host.down();
  await ovsnet.kill('SIGTERM');
  await run('ip', ['netns', 'del', outside]);
});
await ipOk(['netns', 'add', outside]);
await ipOk(['link', 'add', 'ox0', 'netns', host.name, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', outside]);
await ipOk(['-n', host.name, 'addr', 'add', '198.18.0.1/24', 'dev', 'ox0']);
await ipOk(['-n', host.name, 'link', 'set', 'ox0', 'up']);
await ipOk(['-n', outside, 'link', 'set', 'lo', 'up']);
await ipOk(['-n', outside, 'addr', 'add', `${FAR}/32`, 'dev', 'lo']);
await ipOk(['-n', outside, 'addr', 'add', '198.18.0.2/24', 'dev', 'eth0']);
await ipOk(['-n', outside, 'link', 'set', 'eth0', 'up']);
await ipOk(['-n', host.name, 'route', 'add', '198.19.0.0/24', 'via', '198.18.0.2']);

const netId = async (net: string) => (await host.dockerOk(['network', 'inspect', '-f', '{{.Id}}', net])).slice(0, 12);
const macOf = async (dev: string) => (await host.exec(['cat', `/sys/class/net/${dev}/address`])).stdout.trim();

t.test('20 fresh containers each reach an outside address on the first try, ARP answered by the gateway', async (t) => {
  await host.dockerOk(['network', 'create', '-d', 'ovsnet', '--ipam-driver', 'ovsnet', '--subnet', '10.44.1.0/24', 'out1']);
  const gwMac = await macOf(`ovg${await netId('out1')}`);
  t.match(gwMac, /^[0-9a-f:]{17}$/);
  const failures: string[] = [];
  const wrongNeighbour: string[] = [];
  for (let i = 0; i < 20; i++) {
    const r = await host.docker([
      'run',
      '--rm',
      '--network',
      'out1',
      IMAGE,
      'sh',
      '-c',
      `ping -c 1 -W 3 ${FAR}; echo "rc=$?"; ip neigh show 10.44.1.1`,
    ]);
    if (!/rc=0/.test(r.stdout)) failures.push(`container ${i}: ${r.stdout}${r.stderr}`);
    const neighbour = /lladdr (\S+)/.exec(r.stdout)?.[1];
    if (neighbour !== gwMac) wrongNeighbour.push(`container ${i}: ${neighbour ?? 'none'}`);
  }
  t.same(failures, [], 'every first ping answered through the masquerade');
  t.same(wrongNeighbour, [], "every container's neighbour entry for its gateway is the gateway port's MAC");
});

t.test(
  'bridge-driver options: enable_ip_masquerade=false, host_binding_ipv4; one ovsnet does not honour refused with its alternative',
  async (t) => {
    // A second address of the host on the outside's link: published ports must not answer there.
    await ipOk(['-n', host.name, 'addr', 'add', '198.18.0.3/24', 'dev', 'ox0']);
    const opt = (o: string) => ['-o', `com.docker.network.bridge.${o}`];
    const create = 'network create -d ovsnet --ipam-driver ovsnet --subnet 10.44.7.0/24'.split(' ');
    await host.dockerOk([
      ...create,
      ...opt('enable_ip_masquerade=false'),
      ...opt('host_binding_ipv4=198.18.0.1'),
      ...opt('enable_icc=true'),
      'nomasq',
    ]);
    // The outside has no route back to 10.44.7.0/24: unmasqueraded, the reply never comes.
    const out = await host.docker(['run', '--rm', '--network', 'nomasq', IMAGE, 'ping', '-c', '1', '-W', '2', FAR]);
    t.not(out.code, 0, 'no masquerade: the outside cannot answer the container');
    await ipOk(['-n', outside, 'route', 'add', '10.44.7.0/24', 'via', '198.18.0.1']);
    const routed = await host.docker(['run', '--rm', '--network', 'nomasq', IMAGE, 'ping', '-c', '1', '-W', '2', FAR]);
    t.equal(routed.code, 0, "routed back by the outside: answered, from the container's own address");
    await host.dockerOk([
      'run',
      '-d',
      '--name',
      'bound',
      '--network',
      'nomasq',
      '-p',
      '8087:80',
      IMAGE,
      'sh',
      '-c',
      'while true; do printf "HTTP/1.0 200 OK\\r\\n\\r\\nbound" | nc -l -p 80; done',
    ]);
    const get = async (addr: string, tries: number) => {
      for (let i = 0; i < tries; i++) {
        const r = await run('ip', ['netns', 'exec', outside, 'busybox', 'nc', '-w', '2', addr, '8087'], { input: '', timeoutMs: 10_000 });
        if (r.stdout.includes('bound')) return true;
        await new Promise((r) => setTimeout(r, 200));
      }
      return false;
    };
    t.ok(await get('198.18.0.1', 50), 'the published port answers on host_binding_ipv4');
    t.notOk(await get('198.18.0.3', 3), "and not on the host's other address");
    await ipOk(['-n', outside, 'route', 'del', '10.44.7.0/24', 'via', '198.18.0.1']);
    // enable_icc=false is honoured (everyday.test.ts, icc-datapath.test.ts); an option ovsnet has
    // no use for is refused, with what it has instead, and leaves no network.
    const named = await host.docker([
      ...['network', 'create', '-d', 'ovsnet', '--subnet', '10.44.8.0/24'],
      ...['-o', 'com.docker.network.bridge.name=br-x', 'named'],
    ]);
    t.not(named.code, 0);
    t.match(named.stderr, /com\.docker\.network\.bridge\.name=br-x is a bridge-driver option ovsnet does not honour: .*OVSNET_BRIDGE/);
    t.not((await host.docker(['network', 'inspect', 'named'])).code, 0, 'no network left');
    await host.dockerOk(['rm', '-f', 'bound']);
    await host.dockerOk(['network', 'rm', 'nomasq']);
  },
);

t.test("the host end of a running container's veth answers no ARP and has no IPv6 address", async (t) => {
  await host.dockerOk(['run', '-d', '--name', 'stay', '--network', 'out1', IMAGE, 'sleep', '600']);
  const ep = await host.dockerOk(['inspect', '-f', '{{(index .NetworkSettings.Networks "out1").EndpointID}}', 'stay']);
  const hostEnd = `ovh${ep.slice(0, 12)}`;
  const vethMac = await macOf(hostEnd);
  const arping = await host.docker(['exec', 'stay', 'busybox', 'arping', '-c', '2', '-w', '3', '-I', 'eth0', '10.44.1.1']);
  t.notMatch(arping.stdout, vethMac, "no ARP reply from the veth's host end");
  t.match(arping.stdout, /Received [12] response/, 'the gateway answers');
  t.equal((await host.exec(['ip', '-o', '-6', 'addr', 'show', 'dev', hostEnd])).stdout.trim(), '', 'no IPv6 address');
  t.match((await host.exec(['ip', '-o', 'link', 'show', hostEnd])).stdout, /NOARP/);
});

t.test("Docker's default IPAM on ovsnet: its own pool and gateway, IPv6 with --subnet fd00:55::/64", async (t) => {
  await host.dockerOk(['network', 'create', '-d', 'ovsnet', 'dflt']);
  const subnet = await host.dockerOk(['network', 'inspect', '-f', '{{(index .IPAM.Config 0).Subnet}}', 'dflt']);
  t.match(subnet, /^(172\.(1[6-9]|2\d|3[01])|192\.168)\./, "a pool of Docker's default IPAM");
  const r = await host.docker(['run', '--rm', '--network', 'dflt', IMAGE, 'ping', '-c', '1', '-W', '3', FAR]);
  t.equal(r.code, 0, `reaches outside: ${r.stdout}${r.stderr}`);
  await host.dockerOk(['network', 'create', '-d', 'ovsnet', '--ipv6', '--subnet', '10.44.2.0/24', '--subnet', 'fd00:55::/64', 'six']);
  const addr6 = await host.dockerOk(['run', '--rm', '--network', 'six', IMAGE, 'ip', '-o', '-6', 'addr', 'show', 'dev', 'eth0']);
  t.match(addr6, /inet6 fd00:55::/);
});

t.test('subnets the driver refuses from any IPAM, each with the rule and what would do', async (t) => {
  const refused = async (args: string[], message: RegExp, what: string) => {
    const r = await host.docker(['network', 'create', '-d', 'ovsnet', ...args]);
    t.not(r.code, 0, what);
    t.match(r.stderr, message, what);
    t.not((await host.docker(['network', 'inspect', args.at(-1) ?? ''])).code, 0, `${what}: no network left`);
  };
  await refused(
    ['--subnet', '198.18.0.0/25', 'near'],
    /subnet 198\.18\.0\.0\/25 overlaps the host's (connected route 198\.18\.0\.0\/24|address 198\.18\.0\.1) on ox0: .*-o ovsnet\.allow-connected=true/,
    "Docker's IPAM, a subnet on the host's own segment",
  );
  await refused(['--subnet', '169.254.0.0/16', 'll'], /169\.254\.0\.0\/16, link-local .*which cannot number containers/, 'link-local');
  await refused(
    ['--ipam-driver', 'ovsnet', '--subnet', '127.0.0.0/8', 'lo8'],
    /Pool 127\.0\.0\.0\/8 overlaps 127\.0\.0\.0\/8, loopback .*use a private range such as 10\.0\.0\.0\/8/,
    "ovsnet's IPAM, loopback",
  );
  await refused(
    ['--ipam-driver', 'ovsnet', '--subnet', '198.18.0.0/24', 'near2'],
    /Pool 198\.18\.0\.0\/24 overlaps the host's .* on ox0: .*choose a free subnet such as 10\.192\.\d+\.0\/24, or share the segment on purpose with --ipam-opt ovsnet\.allow-connected=true/,
    "ovsnet's IPAM, the host's own segment",
  );
  await host.dockerOk(['network', 'create', '-d', 'ovsnet', '--subnet', '198.18.0.128/25', '-o', 'ovsnet.allow-connected=true', 'shared']);
  t.pass('-o ovsnet.allow-connected=true shares the segment on purpose');
});

t.test('everything removed', async (t) => {
  const all = (await host.dockerOk(['ps', '-aq'])).split('\n').filter((x) => x !== '');
  if (all.length > 0) await host.dockerOk(['rm', '-f', ...all]);
  await host.dockerOk(['network', 'rm', 'out1', 'dflt', 'six', 'shared']);
  t.equal((await host.exec(['ovs-vsctl', 'list-ports', 'ovsnet0'])).stdout.trim(), '', 'no port on the bridge');
});
