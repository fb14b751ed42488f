/**
 * The last-resort handlers of `ovsnet serve` (src/main.ts): a promise rejection
 * nobody handled is logged and the daemon keeps answering; an exception nobody caught is logged
 * as fatal, and the process exits 1 with its socket removed (rather than dying silently).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { NO_OVS, Ovsnet, pluginCall } from '../harness/host.js';
import { waitFor } from '../helpers/wait.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-last-resort-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
const faults = fileURLToPath(new URL('../helpers/faults.js', import.meta.url));

t.test('an unhandled rejection is logged and ovsnet keeps serving; an uncaught exception exits 1, logged', async (t) => {
  const socket = path.join(dir, 'plugins', 'ovsnet.sock');
  const o = await Ovsnet.start(socket, {
    OVSNET_STORE: `sqlite:${path.join(dir, 'state.db')}`,
    OVSNET_OVSDB: NO_OVS,
    OVSNET_LOG_LEVEL: 'warn',
    NODE_OPTIONS: `--import=${faults}`,
  });
  t.teardown(() => (o.child.exitCode === null ? o.kill('SIGKILL') : undefined));

  o.child.kill('SIGUSR2');
  await waitFor(() => o.log.includes('a rejection nobody handles'), 5000, 'the rejection logged');
  t.match(
    o.log,
    /"level":"error".*a promise rejection nobody handled \(a bug in ovsnet; please report it\): test fault: a rejection nobody handles; ovsnet keeps serving/,
  );
  const caps = await pluginCall(socket, 'IpamDriver.GetCapabilities');
  t.equal(caps.status, 200, 'still answering Docker after the rejection');
  t.equal(o.child.exitCode, null, 'still running');

  o.child.kill('SIGHUP');
  t.equal(await o.exited, 1, 'exit status 1 after an uncaught exception');
  t.match(
    o.log,
    /"level":"fatal".*an exception nobody caught .*test fault: an exception nobody catches; ovsnet exits, and reconciles when started again/,
  );
  t.match(o.log, /"stack":"Error: test fault: an exception nobody catches/, 'with its stack');
  t.notOk(fs.existsSync(socket), 'the socket removed');
});
