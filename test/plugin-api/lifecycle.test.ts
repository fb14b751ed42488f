/**
 * `ovsnet serve` as a process: it answers in time for Docker even while its store is unreachable,
 * fails store-bound calls quickly and clearly meanwhile, and on SIGTERM exits 0 and removes its
 * socket.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { NO_OVS, Ovsnet, pluginCall } from '../harness/host.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-life-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

// Docker dials a managed plugin's socket 500 ms after starting it, then every 3 s, and gives up
// after 9.5 s (moby's pluginPostStart). The bound is that limit with a wide margin, not a speed
// target: how fast ovsnet starts is `npm run bench -- startup`.
const STARTUP_LIMIT_MS = 5000;

t.test('up in time for Docker with etcd unreachable; clean SIGTERM', async (t) => {
  const socket = path.join(dir, 'plugins', 'ovsnet.sock');
  // Port 9 (discard) on loopback: nothing listens, every connection is refused.
  const o = await Ovsnet.start(socket, {
    OVSNET_STORE: 'etcd://127.0.0.1:9',
    OVSNET_STORE_TIMEOUT_MS: '500',
    OVSNET_OVSDB: NO_OVS,
    OVSNET_LOG_LEVEL: 'info',
  });
  // ovsnet's own figure, from its process start to listening: polling here adds nothing to it.
  const startup = Number(/"startupMs":(\d+)/.exec(o.log)?.[1]);
  t.ok(startup < STARTUP_LIMIT_MS, `listening ${startup} ms after the process started`);
  t.same((await pluginCall(socket, 'IpamDriver.GetCapabilities')).body, { RequiresMACAddress: false, RequiresRequestReplay: false });
  const t0 = Date.now();
  const pool = await pluginCall(socket, 'IpamDriver.RequestPool', {
    AddressSpace: '',
    Pool: '10.9.0.0/24',
    SubPool: '',
    Options: {},
    V6: false,
  });
  t.equal(pool.status, 500);
  t.match(pool.body, { Err: /not reached its store yet|unavailable|did not answer/ }, 'a clear error, not a hang');
  t.ok(Date.now() - t0 < 3000, `within the bound (${Date.now() - t0} ms)`);
  t.equal(await o.kill('SIGTERM'), 0, 'exit status 0');
  t.notOk(fs.existsSync(socket), 'socket removed');
  t.match(o.log, /"msg":"stopped"/);
});

t.test('an embedded store that cannot be opened stops the process with the reason', async (t) => {
  const file = path.join(dir, 'a-file');
  fs.writeFileSync(file, '');
  const socket = path.join(dir, 'bad', 'ovsnet.sock');
  const o = await Ovsnet.start(socket, { OVSNET_STORE: `sqlite:${file}/state.db`, OVSNET_OVSDB: NO_OVS, OVSNET_LOG_LEVEL: 'warn' }).catch(
    (e: Error) => e,
  );
  // Read the log after the exit: the store fails (and says so) after the socket is up.
  const log = o instanceof Error ? o.message : `exit ${String(await o.kill('SIGTERM'))}: ${o.log}`;
  t.match(log, /cannot open the embedded store at .*a-file\/state\.db/);
});
