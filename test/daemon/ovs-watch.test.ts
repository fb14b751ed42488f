/**
 * OvsWatch against fakes: ovs-vswitchd's bridge management socket played by a unix socket server
 * of the test's (OVSNET_OVSDB unix:DIR/db.sock, so the watch dials DIR/br0.mgmt), OVSDB by the
 * in-memory FakeOvs, the driver's upkeep by a recorder. What a restart sets and clears
 * (flow-restore-wait on the kernel datapath only), how often the bridge is programmed again,
 * what is counted, and what an ovsdb-server restart does.
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { OvsWatch, mgmtSocket } from '../../src/daemon/ovs-watch.js';
import type { DatapathType } from '../../src/driver/ovs/ovsdb.js';
import type { SyncReport } from '../../src/driver/upkeep/openflow-state.js';
import type { RestartReport } from '../../src/driver/upkeep/upkeep.js';
import { createLogger } from '../../src/lib/log.js';
import { Metrics } from '../../src/metrics.js';
import { FakeOvs } from '../helpers/driver-fakes.js';
import { waitFor } from '../helpers/wait.js';

const synced: SyncReport = { changes: undefined, modifications: 7, flows: 5, meters: 2 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The bridge's management socket: connections kept; `drop()` plays ovs-vswitchd restarting. */
async function mgmtServer(t: Test, file: string) {
  const conns: net.Socket[] = [];
  const server = net.createServer((c) => {
    conns.push(c);
    c.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(file, r));
  t.teardown(async () => {
    for (const c of conns) c.destroy();
    await new Promise((r) => server.close(r));
  });
  return {
    conns,
    /** The open connection closed by the server; the watch dials again and is accepted. */
    drop: () => conns.at(-1)?.destroy(),
  };
}

/** A metric's value with these labels (0 if none), `series` for a histogram's _count or _sum (prom-client's own reading). */
async function sample(metrics: Metrics, name: string, labels: Record<string, string> = {}, series = name): Promise<number> {
  const values: { value: number; labels: Record<string, unknown>; metricName?: string }[] =
    (await metrics.registry.getSingleMetric(name)?.get())?.values ?? [];
  const hit = values.find((v) => (v.metricName ?? name) === series && Object.entries(labels).every(([k, l]) => v.labels[k] === l));
  return hit?.value ?? 0;
}

function setup(t: Test, datapath: DatapathType, afterOvsRestart?: () => Promise<RestartReport>) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-ovswatch-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const ovs = new FakeOvs();
  const metrics = new Metrics();
  const calls = { afterOvsRestart: 0, syncFlows: 0, refresh: 0, away: 0, restarted: 0, waitWhenRestarting: [] as boolean[] };
  const upkeep = {
    afterOvsRestart: async (): Promise<RestartReport> => {
      calls.afterOvsRestart += 1;
      calls.waitWhenRestarting.push(ovs.restoreWait);
      return afterOvsRestart === undefined ? { synced, flowsSeconds: 0.02, repaired: [] } : afterOvsRestart();
    },
    syncFlows: async (): Promise<SyncReport> => {
      calls.syncFlows += 1;
      return synced;
    },
    onVswitchdAway: async (): Promise<boolean> => {
      calls.away += 1;
      return calls.away === 1;
    },
  };
  const watch = new OvsWatch({
    log: createLogger('silent'),
    metrics,
    upkeep,
    ovs,
    datapath,
    bridge: 'br0',
    ovsdb: `unix:${dir}/db.sock`,
    refreshDatapath: async () => void (calls.refresh += 1),
    onRestarted: () => void (calls.restarted += 1),
    retryMs: 20,
  });
  t.teardown(() => watch.stop());
  return { dir, ovs, metrics, calls, watch, socket: path.join(dir, 'br0.mgmt') };
}

t.test('mgmtSocket: beside a unix OVSDB socket; none for tcp:', async (t) => {
  t.equal(mgmtSocket('unix:/var/run/openvswitch/db.sock', 'ovsnet0'), '/var/run/openvswitch/ovsnet0.mgmt');
  t.equal(mgmtSocket('tcp:1.2.3.4:6640', 'br'), undefined);
});

t.test('kernel datapath: flow-restore-wait while away, the bridge programmed again, then cleared; counted once', async (t) => {
  const { ovs, metrics, calls, watch, socket } = setup(t, 'system');
  const srv = await mgmtServer(t, socket);
  watch.start();
  await waitFor(() => srv.conns.length === 1, 2000, 'connected');
  await sleep(50);
  t.equal(calls.afterOvsRestart, 0, 'the first connect is no restart');
  t.same(ovs.restoreWaitSets, []);
  srv.drop();
  await waitFor(() => calls.afterOvsRestart === 1, 2000, 'programmed again');
  await watch.idle();
  t.same(calls.waitWhenRestarting, [true], 'flow-restore-wait was set when the bridge was programmed again');
  t.equal(calls.away, 1, 'told the upkeep ovs-vswitchd was away (the bridge made secure for its return)');
  t.same(ovs.restoreWaitSets, [true, false], 'set on the loss, cleared once the flows were in');
  t.equal(ovs.restoreWait, false);
  t.equal(calls.refresh, 1, "the userspace datapath's cached flows dropped");
  t.equal(calls.restarted, 1, "told once (the tunnels' full sync)");
  t.equal(await sample(metrics, 'ovsnet_ovs_restarts_total', { daemon: 'ovs-vswitchd' }), 1, 'one restart counted');
  t.equal(await sample(metrics, 'ovsnet_ovs_restarts_total', { daemon: 'ovsdb-server' }), 0);
  t.equal(await sample(metrics, 'ovsnet_reprogram_seconds', {}, 'ovsnet_reprogram_seconds_count'), 1, 'the reprogram timed');
  t.equal(await sample(metrics, 'ovsnet_reprogram_seconds', {}, 'ovsnet_reprogram_seconds_sum'), 0.02, "as long as upkeep's flows took");
});

t.test('userspace datapath: flow-restore-wait never touched', async (t) => {
  const { ovs, calls, watch, socket } = setup(t, 'netdev');
  const srv = await mgmtServer(t, socket);
  watch.start();
  await waitFor(() => srv.conns.length === 1, 2000, 'connected');
  srv.drop();
  await waitFor(() => calls.afterOvsRestart === 1, 2000, 'programmed again');
  await watch.idle();
  t.same(ovs.restoreWaitSets, []);
  t.same(calls.waitWhenRestarting, [false]);
});

t.test('a restart during a reprogram: exactly one more reprogram, after it', async (t) => {
  let release: () => void = () => undefined;
  let running = 0;
  let most = 0;
  const { metrics, calls, watch, socket } = setup(t, 'netdev', async () => {
    running += 1;
    most = Math.max(most, running);
    if (calls.afterOvsRestart === 1) await new Promise<void>((r) => (release = r));
    running -= 1;
    return { synced, flowsSeconds: 0.01, repaired: [] };
  });
  const srv = await mgmtServer(t, socket);
  watch.start();
  await waitFor(() => srv.conns.length === 1, 2000, 'connected');
  srv.drop();
  await waitFor(() => calls.afterOvsRestart === 1, 2000, 'the first reprogram running');
  srv.drop();
  await waitFor(() => srv.conns.length === 3, 2000, 'back again');
  srv.drop();
  await waitFor(() => srv.conns.length === 4, 2000, 'and again');
  await sleep(50);
  t.equal(calls.afterOvsRestart, 1, 'nothing beside the running one');
  release();
  await waitFor(() => calls.afterOvsRestart === 2, 2000, 'one more');
  await watch.idle();
  await sleep(100);
  t.equal(calls.afterOvsRestart, 2, 'exactly one more for the two restarts meanwhile');
  t.equal(most, 1, 'never two at once');
  t.equal(await sample(metrics, 'ovsnet_ovs_restarts_total', { daemon: 'ovs-vswitchd' }), 3, 'each of the three restarts counted');
});

t.test('a reprogram that fails is tried again; flow-restore-wait stays set until it worked', async (t) => {
  let failures = 1;
  const { ovs, metrics, calls, watch, socket } = setup(t, 'system', async () => {
    if (failures-- > 0) throw new Error('ovs-ofctl: br0: failed to connect to socket');
    return { synced, flowsSeconds: 0.01, repaired: [] };
  });
  const srv = await mgmtServer(t, socket);
  watch.start();
  await waitFor(() => srv.conns.length === 1, 2000, 'connected');
  srv.drop();
  await waitFor(() => calls.afterOvsRestart === 1, 2000, 'the first try');
  await sleep(50);
  t.equal(ovs.restoreWait, true, 'still set after the failure');
  await waitFor(() => calls.afterOvsRestart === 2, 3000, 'tried again (after a second)');
  await watch.idle();
  t.same(ovs.restoreWaitSets, [true, false]);
  t.equal(await sample(metrics, 'ovsnet_reprogram_seconds', {}, 'ovsnet_reprogram_seconds_count'), 1, 'the reprogram that worked timed');
  t.equal(await sample(metrics, 'ovsnet_ovs_restarts_total', { daemon: 'ovs-vswitchd' }), 1, 'one restart, however many tries');
});

t.test('afterReconcile clears a leftover flow-restore-wait, only when set', async (t) => {
  const { ovs, watch } = setup(t, 'system');
  await watch.afterReconcile();
  t.same(ovs.restoreWaitSets, [], 'not set: nothing written');
  ovs.restoreWait = true; // an ovsnet stopped mid-restart left it
  await watch.afterReconcile();
  t.same(ovs.restoreWaitSets, [false]);
  t.equal(ovs.restoreWait, false);
});

t.test('ovsdb-server lost: probed until it answers, then one restart counted and one flow sync', async (t) => {
  const { ovs, metrics, calls, watch } = setup(t, 'system');
  let probes = 0;
  ovs.bridgeExists = async () => {
    probes += 1;
    if (probes <= 3) throw new Error('cannot reach OVSDB');
    return true;
  };
  watch.onOvsdbLost();
  watch.onOvsdbLost(); // the loss said again while probing: one probe loop
  await waitFor(() => calls.syncFlows === 1, 3000, 'the flows synced');
  await sleep(150);
  t.equal(probes, 4, 'until the fourth probe answered');
  t.equal(calls.syncFlows, 1);
  t.equal(calls.afterOvsRestart, 0, 'ovs-vswitchd kept its flows');
  t.equal(calls.restarted, 1, "told once (the tunnels' full sync)");
  t.equal(await sample(metrics, 'ovsnet_ovs_restarts_total', { daemon: 'ovsdb-server' }), 1);
  t.equal(await sample(metrics, 'ovsnet_ovs_restarts_total', { daemon: 'ovs-vswitchd' }), 0);
  t.same(ovs.restoreWaitSets, [], 'flow-restore-wait is for ovs-vswitchd restarts');
  watch.onOvsdbLost();
  await waitFor(() => calls.syncFlows === 2, 3000, 'a later loss is handled again');
});

t.test('tcp: OVSDB: no socket to watch, start and stop do nothing', async (t) => {
  const watch = new OvsWatch({
    log: createLogger('silent'),
    metrics: new Metrics(),
    upkeep: {
      afterOvsRestart: () => Promise.reject(new Error('not called')),
      syncFlows: () => Promise.reject(new Error('not called')),
      onVswitchdAway: () => Promise.reject(new Error('not called')),
    },
    ovs: new FakeOvs(),
    datapath: 'system',
    bridge: 'br0',
    ovsdb: 'tcp:192.0.2.1:6640',
    refreshDatapath: undefined,
  });
  watch.start();
  await sleep(50);
  watch.stop();
  await watch.idle();
  t.pass('nothing dialled, nothing thrown');
});
