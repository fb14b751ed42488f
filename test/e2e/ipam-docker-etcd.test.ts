/** The same IPAM flow with OVSNET_STORE=etcd://: ovsnet and the test share the run's etcd. */
import path from 'node:path';
import t from 'tap';
import { EtcdStore } from '../../src/store/etcd/etcd.js';
import { DockerHost, NO_OVS, Ovsnet } from '../harness/host.js';
import { etcdEndpoints } from '../helpers/services.js';
import { ipamScenarios, type Ctx } from './ipam-scenarios.js';

const endpoints = etcdEndpoints();
const host = await DockerHost.up('ipametcd');
t.teardown(() => host.down());
// IPAM alone needs no host namespace: ovsnet runs here, serving the host's plugin directory,
// and reaches etcd on this namespace's loopback.
const socket = path.join(host.pluginDir, 'ovsnet.sock');
const start = () => Ovsnet.start(socket, { OVSNET_STORE: `etcd://${endpoints.join(',')}`, OVSNET_LOG_LEVEL: 'warn', OVSNET_OVSDB: NO_OVS });
const store = new EtcdStore({ endpoints: endpoints.map((e) => `http://${e}`), timeoutMs: 3000 });
const ctx: Ctx = { host, store, ovsnet: await start(), restartOvsnet: start };
t.teardown(async () => {
  await ctx.ovsnet.kill('SIGTERM');
  await store.close();
});

await ipamScenarios(t, ctx, { prefix: '32', restarts: true });
