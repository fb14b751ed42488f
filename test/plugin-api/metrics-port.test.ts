/**
 * `ovsnet serve` as a process: a metrics port someone else holds costs the metrics, never the
 * plugin socket Docker depends on.
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { NO_OVS, Ovsnet, pluginCall } from '../harness/host.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-metrics-port-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

t.test('a metrics port another process holds: an error naming the address and the holder; the plugin keeps serving', async (t) => {
  const squatter = net.createServer();
  await new Promise<void>((r) => squatter.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise((r) => squatter.close(r)));
  const port = (squatter.address() as net.AddressInfo).port;
  const socket = path.join(dir, 'plugins', 'ovsnet.sock');
  const o = await Ovsnet.start(socket, {
    OVSNET_STORE: `sqlite:${path.join(dir, 'metrics', 'state.db')}`,
    OVSNET_JOURNAL: 'off',
    OVSNET_OVSDB: NO_OVS,
    OVSNET_METRICS_ADDR: String(port),
  });
  // Long enough for a failed listen to have ended the process, as it did.
  await new Promise((r) => setTimeout(r, 1000));
  t.equal(o.child.exitCode, null, 'still running');
  t.same(
    (await pluginCall(socket, 'IpamDriver.GetCapabilities')).body,
    { RequiresMACAddress: false, RequiresRequestReplay: false },
    'the plugin socket answers',
  );
  t.match(
    o.log,
    new RegExp(
      `"level":"error".*cannot serve metrics on 127\\.0\\.0\\.1:${port}: the address is already in use, by pid ${process.pid} \\(node\\)\\. ovsnet keeps serving Docker without metrics: free the port or set OVSNET_METRICS_ADDR`,
    ),
  );
  t.equal(await o.kill('SIGTERM'), 0, 'and stops cleanly: exit status 0');
});

t.test('a metrics address not of this host: the same, with the reason', async (t) => {
  const socket = path.join(dir, 'plugins-elsewhere', 'ovsnet.sock');
  // 192.0.2.1 (TEST-NET-1, RFC 5737) is no address of this machine: EADDRNOTAVAIL.
  const o = await Ovsnet.start(socket, {
    OVSNET_STORE: `sqlite:${path.join(dir, 'elsewhere', 'state.db')}`,
    OVSNET_JOURNAL: 'off',
    OVSNET_OVSDB: NO_OVS,
    OVSNET_METRICS_ADDR: '192.0.2.1:9477',
  });
  await new Promise((r) => setTimeout(r, 1000));
  t.equal(o.child.exitCode, null, 'still running');
  t.equal((await pluginCall(socket, 'Plugin.Activate')).status, 200, 'the plugin socket answers');
  t.match(
    o.log,
    /"level":"error".*cannot serve metrics on 192\.0\.2\.1:9477: listen EADDRNOTAVAIL.*ovsnet keeps serving Docker without metrics/,
  );
  t.equal(await o.kill('SIGTERM'), 0);
});
