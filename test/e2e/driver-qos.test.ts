/**
 * QoS by its effect, on the userspace datapath (the harness's hosts have no
 * openvswitch module), where ingress policing does nothing: TCP out of a container limited to
 * 20 mbit lands within ±20% of it while an unlimited neighbour sends at the same time; packets
 * from a container marked DSCP 46 carry it when they reach the host (counted by iptables' dscp
 * match in the host's INPUT chain: the receiver's view of the wire); endpoint options come
 * through `docker run --network name=NET,driver-opt=...` and `docker network connect
 * --driver-opt`, and win over the network's; a restarted ovs-vswitchd (which forgets meters and
 * flows) gets them back from ovsnet; a group in ovsnet's range added by hand goes at the next
 * flow check, read over OpenFlow.
 */
import path from 'node:path';
import { parseMeters } from '../../src/driver/ovs/flow-diff.js';
import { readGroupIds, readMeters } from '../../src/driver/ovs/of-requests.js';
import { GROUP_BASE } from '../../src/driver/vip/flows.js';
import { throughput as measure } from '../harness/throughput.js';
import t from 'tap';
import { CREATE_OVSNET, DockerHost, IMAGE, type Ovsnet } from '../harness/host.js';

const host = await DockerHost.up('drvqos');
let ovsnet: Ovsnet = await host.startOvsnet();
t.teardown(async () => {
  await host.down();
  await ovsnet.kill('SIGTERM');
});

/** Mbit/s from `container` to a sink on the host's ADDR:PORT (harness/throughput.ts). */
const throughput = (container: string, addr: string, port: number) => measure(host, container, addr, port);

/** Counts, in the host's INPUT chain, TCP packets (each a SYN answered by a reset: nothing listens) to PORT from SRC with DSCP `dscp` and with any other. */
async function dscpSeen(
  container: string,
  src: string,
  dst: string,
  port: number,
  dscp: number,
): Promise<{ marked: number; other: number }> {
  const rule = (m: string[]) => ['-s', src, '-p', 'tcp', '--dport', String(port), '-m', 'dscp', ...m];
  const ipt = (args: string[]) => host.exec(['iptables', '-w', ...args]);
  await ipt(['-I', 'INPUT', ...rule(['--dscp', String(dscp)])]);
  await ipt(['-I', 'INPUT', ...rule(['!', '--dscp', String(dscp)])]);
  try {
    await host.docker(['exec', container, 'sh', '-c', `for i in 1 2 3 4 5 6 7 8 9 10; do nc -w 1 ${dst} ${port} </dev/null; done; true`]);
    const listing = (await ipt(['-L', 'INPUT', '-v', '-x', '-n'])).stdout.split('\n');
    const count = (neg: boolean) =>
      Number(
        listing
          .find((l) => l.includes(src) && l.includes(`dpt:${port}`) && l.includes('DSCP') && l.includes('!') === neg)
          ?.trim()
          .split(/\s+/)[0] ?? NaN,
      );
    return { marked: count(false), other: count(true) };
  } finally {
    await ipt(['-D', 'INPUT', ...rule(['--dscp', String(dscp)])]);
    await ipt(['-D', 'INPUT', ...rule(['!', '--dscp', String(dscp)])]);
  }
}

/** The bridge's management socket in the host, where ovsnet's OpenFlow reads go. */
const mgmtSocket = () => path.join(host.dir, 'run', 'openvswitch', 'ovsnet0.mgmt');
const meters = async () => (await host.exec(['ovs-ofctl', '-O', 'OpenFlow13', 'dump-meters', 'ovsnet0'])).stdout;

/** An ovsnet network with ovsnet's IPAM, and `-o` options. */
const createNet = (name: string, subnet: string, ...opts: string[]) =>
  host.dockerOk([...CREATE_OVSNET, '--subnet', subnet, ...opts.flatMap((o) => ['-o', o]), name]);

const ipOf = (container: string, net: string) =>
  host.dockerOk(['inspect', '-f', `{{(index .NetworkSettings.Networks "${net}").IPAddress}}`, container]);

t.test(
  "20 mbit out of a container (its own option, and its network's), within ±20%, while an unlimited neighbour sends at the same time",
  async (t) => {
    await createNet('qa', '10.71.0.0/24');
    await createNet('qn', '10.73.0.0/24', 'ovsnet.bandwidth=20mbit');
    await host.dockerOk(['run', '-d', '--name', 'lim', '--network', 'name=qa,driver-opt=ovsnet.bandwidth=20mbit', IMAGE, 'sleep', '600']);
    await host.dockerOk(['run', '-d', '--name', 'free', '--network', 'qa', IMAGE, 'sleep', '600']);
    await host.dockerOk(['run', '-d', '--name', 'netlim', '--network', 'qn', IMAGE, 'sleep', '600']);
    const alone = await throughput('free', '10.71.0.1', 5000);
    const [limited, byNetwork, neighbour] = await Promise.all([
      throughput('lim', '10.71.0.1', 5001),
      throughput('netlim', '10.73.0.1', 5003),
      throughput('free', '10.71.0.1', 5002),
    ]);
    t.comment(
      `limited to 20 mbit: by --driver-opt ${limited.toFixed(1)} mbit/s, by the network's -o ${byNetwork.toFixed(1)} mbit/s; ` +
        `unlimited neighbour at the same time ${neighbour.toFixed(1)} mbit/s, alone before ${alone.toFixed(1)} mbit/s`,
    );
    t.ok(limited >= 16 && limited <= 24, `the limited container sends at 20 mbit ±20% (${limited.toFixed(1)})`);
    t.ok(byNetwork >= 16 && byNetwork <= 24, `a container of a network with -o ovsnet.bandwidth=20mbit too (${byNetwork.toFixed(1)})`);
    // A correctness bound, not a speed target: on a loaded 2-core machine the three senders and the
    // sinks share the CPU, so "unaffected" is checked as not limited and not starved.
    t.ok(neighbour > 60, `the neighbour is not limited (${neighbour.toFixed(1)} mbit/s, over three times the limit)`);
    t.ok(neighbour >= alone / 3, `nor starved: ${neighbour.toFixed(1)} mbit/s beside the limited ones, ${alone.toFixed(1)} alone`);
    await host.dockerOk(['rm', '-f', 'netlim']);
    await host.dockerOk(['network', 'rm', 'qn']);
  },
);

t.test("DSCP 46 at the receiver: the endpoint's --driver-opt over the network's -o", async (t) => {
  await createNet('qm', '10.72.0.0/24', 'ovsnet.dscp=10');
  await host.dockerOk(['run', '-d', '--name', 'mark', '--network', 'qa', IMAGE, 'sleep', '600']);
  await host.dockerOk(['network', 'connect', '--driver-opt', 'ovsnet.dscp=46', 'qm', 'mark']);
  await host.dockerOk(['run', '-d', '--name', 'plain', '--network', 'qm', IMAGE, 'sleep', '600']);
  const seen = await dscpSeen('mark', await ipOf('mark', 'qm'), '10.72.0.1', 6001, 46);
  t.same(seen, { marked: 10, other: 0 }, 'every packet from the dscp=46 endpoint arrives with DSCP 46');
  const fromNetwork = await dscpSeen('plain', await ipOf('plain', 'qm'), '10.72.0.1', 6002, 10);
  t.same(fromNetwork, { marked: 10, other: 0 }, "a container without its own value gets the network's DSCP 10");
  const unmarked = await dscpSeen('mark', await ipOf('mark', 'qa'), '10.71.0.1', 6003, 0);
  t.same(unmarked, { marked: 10, other: 0 }, 'the same container on a network without QoS sends DSCP 0');
});

t.test('options refused with what would be valid, and nothing left behind', async (t) => {
  const bad = await host.docker(['network', 'create', '-d', 'ovsnet', '--subnet', '10.73.0.0/24', '-o', 'ovsnet.dscp=64', 'bad']);
  t.match(bad.stderr, /-o ovsnet\.dscp=64 is not valid: expected the DSCP value \(0-63\)/);
  t.not((await host.docker(['network', 'inspect', 'bad'])).code, 0, 'no network left');
  const run1 = await host.docker(['run', '--rm', '--network', 'name=qa,driver-opt=ovsnet.bandwidth=fast', IMAGE, 'true']);
  t.match(run1.stderr, /--driver-opt ovsnet\.bandwidth=fast is not valid: expected the rate out of each container, from 8kbit to 100gbit/);
  const run2 = await host.docker(['run', '--rm', '--network', 'name=qa,driver-opt=ovsnet.burst=64kb', IMAGE, 'true']);
  t.match(run2.stderr, /--driver-opt ovsnet\.burst=64kb needs --driver-opt ovsnet\.bandwidth=RATE beside it/);
});

t.test('ovs-vswitchd forgets meters and flows when it restarts; ovsnet puts them back, and removes them with the endpoint', async (t) => {
  await host.vswitchd('restart');
  // ovsnet restarted reconciles at once (the periodic check would within 10 s).
  await ovsnet.kill('SIGTERM');
  ovsnet = await host.startOvsnet();
  // Reconcile runs in the background of a start: wait for the meter before measuring its effect.
  for (let i = 0; i < 100 && !/meter=\d+/.test(await meters()); i++) await new Promise((r) => setTimeout(r, 100));
  const limited = await throughput('lim', '10.71.0.1', 5003);
  t.comment(`limited to 20 mbit after ovs-vswitchd and ovsnet restarted: ${limited.toFixed(1)} mbit/s`);
  t.ok(limited >= 16 && limited <= 24, `limited again (${limited.toFixed(1)})`);
  const seen = await dscpSeen('mark', await ipOf('mark', 'qm'), '10.72.0.1', 6004, 46);
  t.same(seen, { marked: 10, other: 0 }, 'marked again');
  t.match(await meters(), /meter=\d+/, 'a meter while the limited container runs');
  // The periodic check reads the meters over OpenFlow (of-requests.ts): what it reads is what
  // dump-meters prints, or every check would take the meters for changed by hand.
  const overOpenFlow = await readMeters(mgmtSocket(), 5000);
  t.same([...overOpenFlow], [...parseMeters(await meters())], 'the meters read over OpenFlow are the ones dump-meters prints');
  await host.dockerOk(['rm', '-f', 'lim']);
  t.notMatch(await meters(), /meter=\d+/, 'none once it is gone');
  const flows = (await host.exec(['ovs-ofctl', 'dump-flows', 'ovsnet0'])).stdout;
  t.equal(
    flows.split('\n').filter((l) => l.includes('cookie=0xf5d')).length,
    4,
    "only the marked endpoints' flows are left (ip and ipv6 each)",
  );
});

t.test("a group added by hand in ovsnet's range goes at the next flow check, another controller's stays", async (t) => {
  const mgmt = mgmtSocket();
  const ours = GROUP_BASE + 7;
  const addGroup = (id: number) => host.exec(['ovs-ofctl', '-O', 'OpenFlow15', 'add-group', 'ovsnet0', `group_id=${id},type=all`]);
  await addGroup(ours);
  await addGroup(9);
  t.same((await readGroupIds(mgmt, 5000)).sort(), [9, ours].sort(), 'both read over OpenFlow, as dump-groups lists them');
  // The periodic check (every 10 s while Docker is quiet) reads the groups' IDs over OpenFlow.
  let left: number[] = [];
  for (let i = 0; i < 300; i++) {
    left = await readGroupIds(mgmt, 5000);
    if (!left.includes(ours)) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  t.same(left, [9], "ovsnet's stale group deleted, group 9 left");
  const dumped = (await host.exec(['ovs-ofctl', '-O', 'OpenFlow15', 'dump-groups', 'ovsnet0'])).stdout;
  t.match(dumped, /group_id=9,/, 'dump-groups agrees');
  t.notMatch(dumped, new RegExp(`group_id=${ours},`));
  await host.exec(['ovs-ofctl', '-O', 'OpenFlow15', 'del-groups', 'ovsnet0', 'group_id=9']);
});
