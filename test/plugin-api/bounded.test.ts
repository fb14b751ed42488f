/**
 * Bounded work per request on the plugin socket: metric labels from the fixed
 * set of Docker methods, nothing recorded with metrics off, one reconcile at a time however many
 * Plugin.Activate arrive, a health probe that starts none, idle connections closed, a cap on
 * connections.
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { daemonAnswers } from '../../src/cli/doctor/doctor.js';
import { loadConfig } from '../../src/config/config.js';
import { assemble } from '../../src/daemon/assemble.js';
import { createLogger } from '../../src/lib/log.js';
import { Metrics } from '../../src/metrics.js';
import { listenOnSocket, removeSocket } from '../../src/plugin-api/listen.js';
import { buildServer } from '../../src/plugin-api/server.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import { NO_OVS } from '../harness/host.js';
import { makeIpam } from '../helpers/ipam.js';
import { waitFor } from '../helpers/wait.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-bounded-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
const log = createLogger('silent');
const store = new SqliteStore({ file: path.join(dir, 'state.db') });
const ipam = makeIpam(store, { log });
t.teardown(async () => {
  await ipam.stop();
  await store.close();
});
const post = (app: ReturnType<typeof buildServer>, url: string) => app.inject({ method: 'POST', url });

t.test('metric labels: the route or `unknown`, never the raw URL', async (t) => {
  const metrics = new Metrics();
  const app = buildServer({ log, ipam, metrics });
  t.teardown(() => app.close());
  for (let i = 0; i < 5; i++) t.equal((await post(app, `/IpamDriver.GetCapabilities?x=${i}`)).statusCode, 200);
  await post(app, '/IpamDriver.GetCapabilities');
  await post(app, '/no.such.method');
  await post(app, '/no.such.method?again');
  const text = await metrics.registry.metrics();
  const methods = new Set([...text.matchAll(/ovsnet_docker_call_duration_seconds_count\{method="([^"]*)"/g)].map((m) => m[1]));
  t.same([...methods].sort(), ['IpamDriver.GetCapabilities', 'unknown'], 'two series, whatever the URLs');
  t.match(text, /ovsnet_docker_call_duration_seconds_count\{method="IpamDriver.GetCapabilities",code="200"\} 6/);
});

t.test('metrics off: no registry at all, and the calls are answered', async (t) => {
  const parts = assemble(
    loadConfig({ OVSNET_STORE: `sqlite:${path.join(dir, 'off.db')}`, OVSNET_OVSDB: NO_OVS, OVSNET_SOCKET: path.join(dir, 'off.sock') }),
    log,
  );
  t.teardown(async () => {
    await parts.app.close();
    await parts.ipam.stop();
    await parts.store.close();
  });
  t.equal((await post(parts.app, '/IpamDriver.GetCapabilities?q=1')).statusCode, 200);
  await parts.store.revision();
  t.equal(parts.metrics, undefined, 'nothing observes the calls or the store (test/cli/lean-start.test.ts: prom-client is not loaded)');
});

t.test('Plugin.Activate: one reconcile at a time, later ones fold into one more', async (t) => {
  let running = 0;
  let most = 0;
  let runs = 0;
  let release: () => void = () => undefined;
  const app = buildServer({
    log,
    ipam,
    onActivate: async () => {
      runs++;
      most = Math.max(most, ++running);
      await new Promise<void>((r) => (release = r));
      running--;
    },
  });
  t.teardown(() => app.close());
  for (let i = 0; i < 20; i++) t.equal((await post(app, '/Plugin.Activate')).statusCode, 200);
  t.equal(runs, 1, 'one reconcile started for 20 activations');
  release();
  await waitFor(() => runs === 2, 2000, 'the one follow-up');
  release();
  await new Promise((r) => setTimeout(r, 50));
  t.equal(runs, 2, 'the 19 activations during the first run made one more, not 19');
  t.equal(most, 1, 'never two at once');
});

t.test('the CLI health probe starts no reconcile; idle connections close; a connection cap', async (t) => {
  let runs = 0;
  const app = buildServer({
    log,
    ipam,
    onActivate: () => Promise.resolve(runs++),
    limits: { connectionTimeoutMs: 300, maxConnections: 3 },
  });
  const socket = path.join(dir, 'probe.sock');
  await listenOnSocket(app, socket);
  t.teardown(async () => {
    await app.close();
    removeSocket(socket);
  });
  t.ok(await daemonAnswers(socket), 'the probe sees the daemon');
  t.equal(runs, 0, 'and started no reconcile');
  t.equal(app.server.maxConnections, 3);

  const idle = net.connect(socket);
  const t0 = Date.now();
  await new Promise((r) => idle.once('close', r));
  t.ok(Date.now() - t0 < 2000, `an idle connection closed after ${Date.now() - t0} ms`);

  const held = await Promise.all(
    [1, 2, 3].map(
      () =>
        new Promise<net.Socket>((resolve) => {
          const c = net.connect(socket, () => resolve(c));
        }),
    ),
  );
  t.teardown(() => held.forEach((c) => c.destroy()));
  const fourth = net.connect(socket);
  const closed = await new Promise<boolean>((resolve) => {
    fourth.once('close', () => resolve(true));
    setTimeout(() => resolve(false), 250);
  });
  t.ok(closed, 'a connection beyond the cap is closed at once');
});
