/** ovsnet's IPAM behind Docker's bridge driver, with the embedded store. */
import path from 'node:path';
import t from 'tap';
import { SqliteStore } from '../../src/store/sqlite/sqlite.js';
import { DockerHost, NO_OVS, Ovsnet } from '../harness/host.js';
import { ipamScenarios, type Ctx } from './ipam-scenarios.js';

const host = await DockerHost.up('ipam');
t.teardown(() => host.down());
const socket = path.join(host.pluginDir, 'ovsnet.sock');
const file = path.join(host.dir, 'ovsnet-state.db');
const start = () => Ovsnet.start(socket, { OVSNET_STORE: `sqlite:${file}`, OVSNET_LOG_LEVEL: 'warn', OVSNET_OVSDB: NO_OVS });
// The test reads the same file: the embedded store is safe for several processes.
const store = new SqliteStore({ file });
const ctx: Ctx = { host, store, ovsnet: await start(), restartOvsnet: start };
t.teardown(async () => {
  await ctx.ovsnet.kill('SIGTERM');
  await store.close();
});

await ipamScenarios(t, ctx, { prefix: '31', restarts: true });
