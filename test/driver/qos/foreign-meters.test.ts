/**
 * Reconcile touches only ovsnet's own meters (ids METER_BASE + OpenFlow port): another
 * controller's meters on the same bridge survive it. The real QosFlows runs against a scripted
 * ovs-ofctl that keeps a bridge's meters and flows as ovs-vswitchd would.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { NetworkDriver } from '../../../src/driver/network-driver.js';
import { OpenFlow } from '../../../src/driver/ovs/openflow.js';
import { METER_BASE, QosFlows, meterPort } from '../../../src/driver/ovs/qos-flows.js';
import { createLogger } from '../../../src/lib/log.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import { fakeSideEffects } from '../../helpers/driver-fakes.js';
import { EP, NET, ep, net } from '../../helpers/driver-setup.js';

/** ovs-ofctl -O OpenFlow13 against one bridge: meters by id, flows by cookie. */
function bridge(ports: () => string[]) {
  const meters = new Map<number, string>();
  const flows: { cookie: bigint; text: string }[] = [];
  const ok = (stdout = '') => ({ code: 0, stdout, stderr: '' });
  const run = async (_cmd: string, args: readonly string[]) => {
    const [verb = '', , arg = ''] = args.slice(2);
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
      case 'dump-meters':
        return ok(
          `OFPST_METER_CONFIG reply (OF1.3) (xid=0x2):\n${[...meters.keys()].map((m) => `meter=${m} kbps burst stats bands=\ntype=drop rate=100 burst_size=100\n`).join('')}`,
        );
      case 'add-flow': {
        flows.push({ cookie: BigInt(/cookie=(0x[0-9a-f]+)/.exec(arg)?.[1] ?? '0'), text: arg });
        return ok();
      }
      case 'del-flows':
      case 'dump-flows': {
        const [value = '0', mask = '-1'] = (/cookie=([^,]+)/.exec(arg)?.[1] ?? '0/-1').split('/');
        const m = mask === '-1' ? (1n << 64n) - 1n : BigInt(mask);
        const hit = (f: { cookie: bigint }) => (f.cookie & m) === (BigInt(value) & m);
        if (verb === 'dump-flows')
          return ok(
            flows
              .filter(hit)
              .map((f) => ` cookie=0x${f.cookie.toString(16)}, table=0, ${f.text}\n`)
              .join(''),
          );
        for (let i = flows.length - 1; i >= 0; i--) if (hit(flows[i] ?? { cookie: -1n })) flows.splice(i, 1);
        return ok();
      }
      default:
        return { code: 1, stdout: '', stderr: `unscripted ${args.join(' ')}` };
    }
  };
  return { meters, run };
}

t.test("another controller's meters survive reconcile; ovsnet's stale one goes, its live one stays", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-meters-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const store = new SqliteStore({ file: path.join(dir, 'state.db') });
  t.teardown(() => store.close());
  const fx = fakeSideEffects();
  const ofctl = bridge(() => [...fx.ovs.ports.keys()]);
  const driver = new NetworkDriver({
    store,
    log: createLogger('silent'),
    ...fx,
    qos: new QosFlows(new OpenFlow(ofctl.run)),
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
  // leftover of ovsnet's for a port no endpoint has.
  const foreign = [1, ofport, 7, 0xffff0000];
  for (const id of foreign) ofctl.meters.set(id, `meter=${id},kbps,bands=type=drop,rate=1`);
  ofctl.meters.set(METER_BASE + 99, 'meter=stale');
  const { repaired } = await driver.reconcile();
  t.ok(repaired.includes('QoS of OpenFlow port 99 (no endpoint)'), 'its own stale meter removed');
  t.same(
    [...ofctl.meters.keys()].sort((a, b) => a - b),
    [...foreign, METER_BASE + ofport].sort((a, b) => a - b),
    'every foreign meter kept',
  );
  t.same(await driver.checkGuards(), [], 'the periodic check is content too');
  t.same([...ofctl.meters.keys()].length, foreign.length + 1);
});

t.test('meterPort: only ids in the range map to a port', async (t) => {
  t.equal(meterPort(METER_BASE + 5), 5);
  t.equal(meterPort(METER_BASE + 0xfeff), 0xfeff);
  for (const id of [0, 5, METER_BASE, METER_BASE + 0xff00, 0xffff0000]) t.equal(meterPort(id), undefined, String(id));
});
