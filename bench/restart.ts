/**
 * Restart benchmark, on a simulated host (test/harness) with real Open vSwitch (userspace
 * datapath), embedded store, no etcd. For 10, 100 and 1,000 endpoints (BENCH_ENDPOINTS, e.g.
 * "10,100"), each on a fresh host:
 * 1. ovsnet's driver, built as src/daemon/assemble.ts builds it (Ovsdb, OpenFlow, Flows, QosFlows,
 *    GroupFlows, FlowSync), makes one network and N endpoints by direct CreateEndpoint + Join
 *    calls, every tenth with a QoS rate (`ovsnet.bandwidth`: an OpenFlow meter and flows).
 * 2. ovs-vswitchd is restarted (host.sh restart-vswitchd); an OpenFlowWatch on the bridge's
 *    management socket notices it go and come back, and calls upkeep.afterOvsRestart() at once,
 *    as the daemon's OvsWatch does. Measured: ovs-vswitchd away (restart command start to the
 *    watch's connect), onBack to flows back (afterOvsRestart's flowsSeconds), the whole
 *    afterOvsRestart, and the flows and meters restored, checked on the bridge with ovs-ofctl.
 * 3. A no-change ovsnet restart: a new driver in a new process over the same store and OVS,
 *    driver.reconcile(), then upkeep.syncFlows(): the OpenFlow modifications of both (expected 0).
 * The driver runs in a child process inside the host's network and mount namespaces (as the
 * daemon does under nsenter): this file is that child too (`node restart.js make|again ...`).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Flows } from '../src/driver/ovs/flows.js';
import { OpenFlow } from '../src/driver/ovs/openflow.js';
import { QosFlows } from '../src/driver/ovs/qos-flows.js';
import { GroupFlows } from '../src/driver/ovs/groups/group-flows.js';
import { FlowSync } from '../src/driver/ovs/flow-sync.js';
import { OpenFlowWatch } from '../src/driver/ovs/of-watch.js';
import { Ovsdb } from '../src/driver/ovs/ovsdb.js';
import { Vswitchd } from '../src/driver/ovs/vswitchd.js';
import { OWN, scopeArg } from '../src/driver/ovs/cookies.js';
import { Links } from '../src/driver/links/links.js';
import { Nat } from '../src/driver/ports/nat.js';
import { HostPorts } from '../src/driver/ports/host-ports.js';
import { Uplink } from '../src/driver/uplink/uplink.js';
import { HostIp } from '../src/driver/uplink/host-ip.js';
import { NetworkDriver } from '../src/driver/network-driver.js';
import { mgmtSocket } from '../src/daemon/ovs-watch.js';
import { spawner } from '../src/lib/exec.js';
import { createLogger } from '../src/lib/log.js';
import { SqliteStore } from '../src/store/sqlite/sqlite.js';
import { DockerHost, run } from '../test/harness/host.js';
import { fmt, table } from './stats.js';

const SELF = fileURLToPath(import.meta.url);
const BRIDGE = 'ovsnet0'; // OVSNET_BRIDGE's default
const OVSDB = 'unix:/run/openvswitch/db.sock'; // inside the host's mount namespace
const STORE = '/run/ovsnet-bench/state.db'; // inside the host's mount namespace
const NETWORK = '4d'.repeat(32);
const TAG = 'RESTART-BENCH ';
const now = () => performance.timeOrigin + performance.now(); // epoch ms, comparable across processes

// ---------------------------------------------------------------- child (inside the host)

function build() {
  fs.mkdirSync(path.dirname(STORE), { recursive: true });
  const log = createLogger('warn');
  const store = new SqliteStore({ file: STORE });
  const ovs = new Ovsdb(OVSDB, 30_000);
  // When each waitApplied returned: afterOvsRestart's first step, ovs-vswitchd giving every port its OpenFlow number again.
  const applied: number[] = [];
  const waitApplied = ovs.waitApplied.bind(ovs);
  ovs.waitApplied = async () => {
    await waitApplied();
    applied.push(now());
  };
  const vswitchd = Vswitchd.besideOvsdb(OVSDB, 30_000);
  const run = spawner();
  const openflow = new OpenFlow(run);
  const links = new Links();
  const driver = new NetworkDriver({
    store,
    log: log.child({ component: 'driver' }),
    ovs,
    links,
    nat: new Nat(run),
    hostPorts: new HostPorts(log.child({ component: 'ports' })),
    bridge: BRIDGE,
    datapath: () => 'netdev',
    host: 'benchrestart',
    flows: new Flows(openflow),
    qos: new QosFlows(openflow),
    groups: new GroupFlows(openflow),
    openflow: new FlowSync(openflow, (bridge) => mgmtSocket(OVSDB, bridge)),
    uplink: new Uplink({ ovs, log: log.child({ component: 'uplink' }), bridge: BRIDGE, name: '', ip: new HostIp(run) }),
  });
  const refreshDatapath = async (): Promise<void> => {
    await ovs.waitApplied();
    await vswitchd?.purgeFlows();
  };
  const close = async (): Promise<void> => {
    await driver.settled();
    ovs.close();
    await links.close();
    await store.close();
  };
  return { driver, refreshDatapath, close, applied };
}

/** ovsnet's flows (its cookie space), the `grep -c cookie=0xf5` of them, and meters, as ovs-ofctl dumps them. */
async function onBridge(): Promise<{ flows: number; f5: number; meters: number }> {
  const dump = await run('ovs-ofctl', ['-O', 'OpenFlow13', 'dump-flows', BRIDGE, scopeArg(OWN)]);
  const meters = await run('ovs-ofctl', ['-O', 'OpenFlow13', 'dump-meters', BRIDGE]);
  if (dump.code !== 0 || meters.code !== 0) throw new Error(`ovs-ofctl: ${dump.stderr}${meters.stderr}`);
  const lines = dump.stdout.split('\n').filter((l) => l.includes('cookie='));
  return {
    flows: lines.length,
    f5: lines.filter((l) => l.includes('cookie=0xf5')).length,
    meters: meters.stdout.split('\n').filter((l) => /meter=\d+/.test(l)).length,
  };
}

const say = (o: unknown) => process.stdout.write(`${TAG}${JSON.stringify(o)}\n`);

async function childMake(n: number): Promise<void> {
  const { driver, refreshDatapath, close, applied } = build();
  await driver.createNetwork({
    networkId: NETWORK,
    options: {},
    ipv4: [{ pool: '10.77.0.0/16', gateway: '10.77.0.1/16' }],
    ipv6: [],
  });
  const t0 = now();
  for (let i = 0; i < n; i++) {
    const a = i + 2;
    const endpointId = `${i.toString(16).padStart(8, '0')}${'e'.repeat(56)}`;
    await driver.createEndpoint({
      networkId: NETWORK,
      endpointId,
      address: `10.77.${a >> 8}.${a & 255}/16`,
      addressV6: '',
      mac: '',
      portmap: [],
      options: i % 10 === 0 ? { 'ovsnet.bandwidth': '50mbit' } : {},
    });
    await driver.join(NETWORK, endpointId);
  }
  const makeMs = now() - t0;
  const before = await driver.upkeep.syncFlows(); // should find nothing to do
  const shown = await onBridge();
  let lostAt: number | undefined;
  let done: (r: unknown) => void = () => undefined;
  const result = new Promise((resolve) => (done = resolve));
  const socket = mgmtSocket(OVSDB, BRIDGE);
  if (socket === undefined) throw new Error('no management socket');
  const watch = new OpenFlowWatch({
    socket,
    retryMs: 10,
    onLost: () => (lostAt = now()),
    onBack: () => {
      const backAt = now();
      void (async () => {
        const r = await driver.upkeep.afterOvsRestart();
        const wholeMs = now() - backAt;
        const appliedMs = (applied.find((t) => t >= backAt) ?? NaN) - backAt;
        await refreshDatapath(); // as OvsWatch does after: not in the figures
        done({
          lostAt,
          backAt,
          appliedMs,
          flowsMs: r.flowsSeconds * 1000,
          wholeMs,
          synced: { ...r.synced, changes: undefined },
          repaired: r.repaired,
          after: await onBridge(),
        });
      })().catch((err: unknown) => done({ error: String(err) }));
    },
  });
  watch.start();
  const limit = Date.now() + 10_000;
  while (!watch.connected) {
    if (Date.now() > limit) throw new Error(`no OpenFlow connection on ${socket}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  say({ ready: true, makeMs, flows: before.flows, meters: before.meters, modsBefore: before.modifications, shown });
  say(await result);
  watch.stop();
  await close();
}

async function childAgain(): Promise<void> {
  const { driver, close } = build();
  const t0 = now();
  const r = await driver.reconcile();
  const reconcileMs = now() - t0;
  const synced = await driver.upkeep.syncFlows();
  say({
    reconcileMs,
    repaired: r.repaired,
    removed: r.removed,
    syncMods: synced.modifications,
    flows: synced.flows,
    meters: synced.meters,
  });
  await close();
}

// ---------------------------------------------------------------- parent

interface Child {
  next(): Promise<Record<string, unknown>>;
  exited: Promise<number | null>;
}

function child(host: DockerHost, args: string[]): Child {
  const p = spawn(
    'nsenter',
    [`--net=/run/netns/${host.name}`, `--mount=${host.dir}/mntns`, `--uts=${host.dir}/utsns`, '--', process.execPath, SELF, ...args],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const queue: Record<string, unknown>[] = [];
  const waiting: ((o: Record<string, unknown>) => void)[] = [];
  const exited = new Promise<number | null>((resolve) => p.on('close', resolve));
  readline.createInterface({ input: p.stdout }).on('line', (line) => {
    if (!line.startsWith(TAG)) {
      console.error(`  [child] ${line}`);
      return;
    }
    const o = JSON.parse(line.slice(TAG.length)) as Record<string, unknown>;
    const w = waiting.shift();
    if (w === undefined) queue.push(o);
    else w(o);
  });
  return {
    exited,
    next: () => {
      const o = queue.shift();
      if (o !== undefined) return Promise.resolve(o);
      return Promise.race([
        new Promise<Record<string, unknown>>((resolve) => waiting.push(resolve)),
        exited.then((code) => {
          throw new Error(`child ${args.join(' ')} exited ${code}`);
        }),
      ]);
    },
  };
}

interface Row {
  n: number;
  makeMs: number;
  flows: number;
  meters: number;
  onBridge: string;
  appliedMs: number;
  flowsMs: number;
  wholeMs: number;
  awayMs: number;
  noChange: string;
  reconcileMs: number;
}

async function one(n: number): Promise<Row> {
  const host = await DockerHost.up('benchrst');
  try {
    const make = child(host, ['make', String(n)]);
    const ready = (await make.next()) as { makeMs: number; flows: number; meters: number; modsBefore: number; shown: { flows: number } };
    const restartAt = now();
    await host.vswitchd('restart');
    const r = (await make.next()) as {
      error?: string;
      backAt: number;
      appliedMs: number;
      flowsMs: number;
      wholeMs: number;
      synced: { modifications: number; flows: number; meters: number };
      repaired: string[];
      after: { flows: number; f5: number; meters: number };
    };
    if (r.error !== undefined) throw new Error(`afterOvsRestart: ${r.error}`);
    if ((await make.exited) !== 0) throw new Error('the make child failed');
    const again = child(host, ['again']);
    const a = (await again.next()) as { reconcileMs: number; repaired: string[]; removed: string[]; syncMods: number };
    await again.exited;
    const fromReconcile = a.repaired.map((s) => /^(\d+) OpenFlow changes$/.exec(s)?.[1]).find((m) => m !== undefined) ?? '0';
    console.log(
      `${n} endpoints: made in ${fmt(ready.makeMs / 1000, 1)} s; before the restart ${ready.shown.flows} ovsnet flows on the bridge ` +
        `(sync wanted ${ready.flows} flows, ${ready.meters} meters, changed ${ready.modsBefore}); after: ${r.synced.modifications} modifications, ` +
        `on the bridge ${r.after.flows} flows (${r.after.f5} match cookie=0xf5), ${r.after.meters} meters; afterOvsRestart repaired: ${JSON.stringify(r.repaired)}; ` +
        `no-change restart reconcile ${fmt(a.reconcileMs, 0)} ms, repaired ${JSON.stringify(a.repaired)}, removed ${JSON.stringify(a.removed)}`,
    );
    return {
      n,
      makeMs: ready.makeMs,
      flows: r.synced.flows,
      meters: r.synced.meters,
      onBridge: `${r.after.flows}/${r.after.meters}`,
      appliedMs: r.appliedMs,
      flowsMs: r.flowsMs,
      wholeMs: r.wholeMs,
      awayMs: r.backAt - restartAt,
      noChange: `${fromReconcile} + ${a.syncMods}`,
      reconcileMs: a.reconcileMs,
    };
  } finally {
    await host.down();
  }
}

export async function benchRestart(): Promise<void> {
  const sizes = (process.env.BENCH_ENDPOINTS ?? '10,100,1000').split(',').map(Number);
  const rows: Row[] = [];
  for (const n of sizes) rows.push(await one(n));
  console.log(
    '\novs-vswitchd restart on a simulated host (userspace datapath), embedded store; one network, every tenth endpoint with a QoS meter\n',
  );
  console.log(
    table(
      [
        'endpoints',
        'flows',
        'meters',
        'on bridge after (flows/meters)',
        'reprogram ms (onBack -> flows back)',
        'of which ports applied ms',
        'whole afterOvsRestart ms',
        'vswitchd away ms',
        'no-change restart modifications (reconcile + sync)',
      ],
      rows.map((r) => [
        String(r.n),
        String(r.flows),
        String(r.meters),
        r.onBridge,
        fmt(r.flowsMs, 1),
        fmt(r.appliedMs, 1),
        fmt(r.wholeMs, 1),
        fmt(r.awayMs, 1),
        r.noChange,
      ]),
    ),
  );
  console.log(`\nno-change restart reconcile took ${rows.map((r) => `${fmt(r.reconcileMs, 0)} ms (${r.n})`).join(', ')}`);
}

if (process.argv[1] === SELF) {
  const mode = process.argv[2];
  try {
    if (mode === 'make') await childMake(Number(process.argv[3]));
    else if (mode === 'again') await childAgain();
    else throw new Error(`unknown mode ${mode}`);
    process.exit(0);
  } catch (err) {
    console.error(err);
    process.exit(1);
  }
}
