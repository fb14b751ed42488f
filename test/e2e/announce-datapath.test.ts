/**
 * A joined endpoint's announcement (src/driver/endpoint/announce.ts) by its effect, on a bridge of
 * the test's own (test/harness/ns-switch.ts: namespaces as containers on access ports). ovsnet's
 * Announcer, on a real OpenFlow connection (OpenFlowWatch on the bridge's management socket) and
 * a real OVSDB, announces member b's addresses: member a, whose kernel held entries for both under
 * another MAC (b's address had been elsewhere), takes b's MAC for both (the ARP announcement and
 * the neighbour advertisement were well formed and reached it) and its first ping of either
 * reaches b. A MAC announced on b's port is learned on that port (in by it, through the tables).
 * An announcement for a port that does not exist sends nothing.
 */
import t from 'tap';
import pino from 'pino';
import { Announcer } from '../../src/driver/endpoint/announce.js';
import { OpenFlowWatch } from '../../src/driver/ovs/of-watch.js';
import { Ovsdb } from '../../src/driver/ovs/ovsdb.js';
import { must, run } from '../harness/host.js';
import { nsSwitch } from '../harness/ns-switch.js';

const TAG = 30;
const sw = await nsSwitch(t, 'ann', { tag: TAG, address: '10.78.0.1', address6: 'fd78::1' });
const a = await sw.member('a', TAG, '10.78.0.2', 'fd78::2');
const b = await sw.member('b', TAG, '10.78.0.3', 'fd78::3');
const watch = new OpenFlowWatch({ socket: `${sw.dir}/br0.mgmt`, onLost: () => undefined, onBack: () => undefined });
const ovsdb = new Ovsdb(`unix:${sw.dir}/db.sock`, 5000);
const warnings: string[] = [];
const log = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(line) });
const announcer = new Announcer({ log, ovs: ovsdb, bridge: () => ({ openflowVersion: watch.version, send: (m) => watch.send(m) }) });
t.teardown(() => {
  announcer.stop();
  watch.stop();
  ovsdb.close();
});
watch.start();

const OLD_MAC = '02:00:00:00:00:99';
const neighbour = async (ns: string, address: string): Promise<string> =>
  /lladdr (\S+)/.exec((await run('ip', ['-n', ns, 'neigh', 'show', address, 'dev', 'eth0'])).stdout)?.[1] ?? '';
async function until(cond: () => Promise<boolean>, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 50))) if (await cond()) return true;
  return cond();
}

t.test("b's addresses announced: a's kernel takes b's MAC for both, and reaches b at once", async (t) => {
  t.ok(await until(async () => watch.version !== undefined, 5000), `the OpenFlow connection is up (version ${watch.version})`);
  for (const address of [b.address, b.address6]) {
    await must('ip', ['-n', a.ns, 'neigh', 'replace', address, 'lladdr', OLD_MAC, 'dev', 'eth0', 'nud', 'stale']);
  }
  t.equal(await neighbour(a.ns, b.address), OLD_MAC, 'before: the old MAC for the IPv4 address');
  announcer.announce({ hostVeth: b.port, mac: b.mac, address: `${b.address}/24`, addressV6: `${b.address6}/64` });
  t.ok(await until(async () => (await neighbour(a.ns, b.address)) === b.mac, 3000), `IPv4: a has ${b.mac} (b's MAC)`);
  t.ok(await until(async () => (await neighbour(a.ns, b.address6)) === b.mac, 3000), `IPv6: a has ${b.mac}`);
  t.equal(
    (await run('ip', ['netns', 'exec', a.ns, 'busybox', 'ping', '-c', '1', '-W', '1', b.address])).code,
    0,
    'the first ping of b (IPv4)',
  );
  t.equal((await run('ip', ['netns', 'exec', a.ns, 'busybox', 'ping', '-6', '-c', '1', '-W', '1', b.address6])).code, 0, 'and IPv6');
  t.same(warnings, []);
});

t.test("a MAC announced on b's port is learned on that port; a port that does not exist sends nothing", async (t) => {
  const mac = '02:42:0a:4e:00:63';
  announcer.announce({ hostVeth: b.port, mac, address: '10.78.0.99/24' });
  const fdb = async () => (await sw.inSw(['ovs-appctl', 'fdb/show', 'br0'])).stdout;
  t.ok(
    await until(async () => new RegExp(`^\\s*${b.ofport}\\s+${TAG}\\s+${mac}`, 'm').test(await fdb()), 3000),
    `${mac} learned on b's port (${b.ofport}), VLAN ${TAG}`,
  );
  await new Promise((r) => setTimeout(r, 1200)); // its second announcement gone too
  const before = announcer.counts.sent;
  announcer.announce({ hostVeth: 'p-nothere', mac, address: '10.78.0.98/24' });
  await new Promise((r) => setTimeout(r, 300));
  t.equal(announcer.counts.sent, before, 'nothing sent for a port OVS does not have');
  t.equal(announcer.queued, 0, 'and it is not waited for');
  t.same(warnings, []);
});
