/**
 * Reconcile touches only ovsnet's own meters (ids METER_BASE + OpenFlow port) and flows (its
 * cookies): another controller's on the same bridge survive it. The real QosFlows and FlowSync
 * run against a scripted ovs-ofctl that keeps a bridge's meters and flows as ovs-vswitchd would.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { NetworkDriver } from '../../../src/driver/network-driver.js';
import { FlowSync } from '../../../src/driver/ovs/flow-sync.js';
import { OpenFlow } from '../../../src/driver/ovs/openflow.js';
import { METER_BASE, QosFlows, meterPort } from '../../../src/driver/ovs/qos-flows.js';
import { stdinText, type Stdin } from '../../../src/lib/exec.js';
import { createLogger } from '../../../src/lib/log.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import { fakeSideEffects } from '../../helpers/driver-fakes.js';
import { EP, NET, ep, net } from '../../helpers/driver-setup.js';

/** A flow as ovs-vswitchd keeps it, from add-flow's form or diff-flows' (match, cookie and actions apart). */
function parseFlow(text: string): { key: string; cookie: bigint; actions: string } {
  const at = text.indexOf('actions=');
  const head = at < 0 ? text : text.slice(0, at);
  const cookie = BigInt(/cookie=(0x[0-9a-f]+)/.exec(head)?.[1] ?? '0');
  const key = head
    .split(/[\s,]+/)
    .filter((w) => w !== '' && !w.startsWith('cookie='))
    .join(',');
  return { key, cookie, actions: at < 0 ? '' : text.slice(at + 'actions='.length).trim() };
}

/** As diff-flows prints a flow. */
const shown = (f: { key: string; cookie: bigint; actions: string }) =>
  `${f.key}${f.cookie === 0n ? '' : ` cookie=0x${f.cookie.toString(16)}`} actions=${f.actions}`;

/** As dump-meters prints a meter given in add-meter's form. */
const dumped = (id: number, spec: string) => {
  const [head = '', bands = ''] = spec.replace(/^meter=\d+,?/, '').split('bands=');
  return `meter=${id} ${head.replaceAll(',', ' ').trim()} bands=\n${bands.replaceAll(',', ' ')}\n`;
};

/**
 * ovs-ofctl against one bridge: meters by id, flows by match (an add replaces a flow of the same
 * match), diff-flows against its stdin (a file), a bundle of add and delete_strict lines on stdin.
 */
function bridge(ports: () => string[]) {
  const meters = new Map<number, string>();
  const flows = new Map<string, { key: string; cookie: bigint; actions: string }>();
  const ok = (stdout = '') => ({ code: 0, stdout, stderr: '' });
  const add = (text: string) => {
    const f = parseFlow(text);
    flows.set(f.key, f);
  };
  const run = async (_cmd: string, all: readonly string[], input?: Stdin) => {
    const args = all.filter((a, i) => a !== '--bundle' && a !== '-O' && all[i - 1] !== '-O');
    const [verb = '', , arg = ''] = args;
    const id = Number(/meter=(\d+)/.exec(arg)?.[1] ?? -1);
    switch (verb) {
      case 'dump-ports-desc':
        return ok(
          ports()
            .map((p, i) => ` ${i + 1}(${p}): addr:02:00:00:00:00:01\n`)
            .join(''),
        );
      case 'add-meter':
        if (meters.has(id)) return { code: 1, stdout: '', stderr: 'OFPMMFC_METER_EXISTS' };
        meters.set(id, arg);
        return ok();
      case 'mod-meter':
        meters.set(id, arg);
        return ok();
      case 'del-meter':
        meters.delete(id);
        return ok();
      case 'dump-groups':
        return ok('OFPST_GROUP_DESC reply (OF1.5) (xid=0x2):\n'); // no group: this scripted switch has none
      case 'dump-meters':
        return ok(`OFPST_METER_CONFIG reply (OF1.3) (xid=0x2):\n${[...meters].map(([m, spec]) => dumped(m, spec)).join('')}`);
      case 'add-flow':
        add(arg);
        return ok();
      case 'add-flows':
        for (const line of stdinText(input)
          .split('\n')
          .filter((l) => l !== '')) {
          if (line.startsWith('add ')) add(line.slice(4));
          else if (line.startsWith('delete_strict ')) flows.delete(parseFlow(line.slice('delete_strict '.length)).key);
          else return { code: 1, stdout: '', stderr: `unknown flow mod ${line}` };
        }
        return ok();
      case 'diff-flows': {
        const wanted = new Map(
          stdinText(input)
            .split('\n')
            .filter((l) => l !== '')
            .map((l) => [parseFlow(l).key, parseFlow(l)] as const),
        );
        const lines: string[] = [];
        for (const [key, f] of flows)
          if (wanted.get(key) === undefined || shown(wanted.get(key) ?? f) !== shown(f)) lines.push(`-${shown(f)}`);
        for (const [key, f] of wanted)
          if (flows.get(key) === undefined || shown(flows.get(key) ?? f) !== shown(f)) lines.push(`+${shown(f)}`);
        return { code: lines.length === 0 ? 0 : 2, stdout: lines.map((l) => `${l}\n`).join(''), stderr: '' };
      }
      case 'del-flows': {
        const [value = '0', mask = '-1'] = (/cookie=([^,]+)/.exec(arg)?.[1] ?? '0/-1').split('/');
        const m = mask === '-1' ? (1n << 64n) - 1n : BigInt(mask);
        for (const [key, f] of flows) if ((f.cookie & m) === (BigInt(value) & m)) flows.delete(key);
        return ok();
      }
      default:
        return { code: 1, stdout: '', stderr: `unscripted ${all.join(' ')}` };
    }
  };
  return { meters, flows, run };
}

t.test("another controller's meters and flows survive reconcile; ovsnet's stale meter goes, its live one stays", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-meters-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const store = new SqliteStore({ file: path.join(dir, 'state.db') });
  t.teardown(() => store.close());
  const fx = fakeSideEffects();
  const ofctl = bridge(() => [...fx.ovs.ports.keys()]);
  const of = new OpenFlow(ofctl.run);
  const driver = new NetworkDriver({
    store,
    log: createLogger('silent'),
    ...fx,
    qos: new QosFlows(of),
    openflow: new FlowSync(of),
    host: 'h1',
    bridge: 'br0',
    datapath: () => 'netdev',
  });
  await driver.createNetwork(net(NET));
  await driver.createEndpoint({ ...ep(), options: { 'ovsnet.bandwidth': '20mbit' } });
  await driver.join(NET, EP);
  const ofport = [...fx.ovs.ports.keys()].indexOf(`ovh${EP.slice(0, 12)}`) + 1;
  t.same([...ofctl.meters.keys()], [METER_BASE + ofport], "the endpoint's meter is in ovsnet's range");
  // Another controller's meters, one with the endpoint's own port number as its id, and a
  // leftover of ovsnet's for a port no endpoint has; another controller's flows.
  const foreign = [1, ofport, 7, 0xffff0000];
  for (const id of foreign) ofctl.meters.set(id, `meter=${id},kbps,bands=type=drop,rate=1`);
  ofctl.meters.set(METER_BASE + 99, `meter=${METER_BASE + 99},kbps,bands=type=drop,rate=5`);
  const foreignFlows = ['priority=5,ip,nw_dst=1.2.3.4,actions=drop', 'cookie=0x1234,priority=6,ip,nw_dst=1.2.3.5,actions=drop'];
  for (const f of foreignFlows) ofctl.flows.set(parseFlow(f).key, parseFlow(f));
  const before = ofctl.flows.size;
  const { repaired } = await driver.reconcile();
  t.ok(repaired.includes('1 OpenFlow changes'), `its own stale meter removed, nothing else: ${repaired.join(', ')}`);
  t.same(
    [...ofctl.meters.keys()].sort((a, b) => a - b),
    [...foreign, METER_BASE + ofport].sort((a, b) => a - b),
    'every foreign meter kept',
  );
  t.equal(ofctl.flows.size, before, "every flow kept: another controller's and ovsnet's own");
  t.equal((await driver.upkeep.syncFlows()).modifications, 0, 'the periodic sync is content too');
  t.same([...ofctl.meters.keys()].length, foreign.length + 1);
  ofctl.flows.clear();
  ofctl.meters.clear(); // ovs-vswitchd restarted
  const back = await driver.upkeep.syncFlows();
  t.match(back, { modifications: 3, flows: 2, meters: 1 }, 'the base flow, the QoS flow and its meter put back');
  t.same([...ofctl.meters.keys()], [METER_BASE + ofport]);
});

t.test('meterPort: only ids in the range map to a port', async (t) => {
  t.equal(meterPort(METER_BASE + 5), 5);
  t.equal(meterPort(METER_BASE + 0xfeff), 0xfeff);
  for (const id of [0, 5, METER_BASE, METER_BASE + 0xff00, 0xffff0000]) t.equal(meterPort(id), undefined, String(id));
});
