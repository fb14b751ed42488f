/** The Open vSwitch driver end to end, with Docker's default IPAM. */
import t from 'tap';
import { DockerHost } from '../harness/host.js';
import { driverScenarios, type DriverCtx } from './driver-scenarios.js';

const host = await DockerHost.up('drvdefault'.slice(0, 8));
const ctx: DriverCtx = { host, ovsnet: await host.startOvsnet() };
t.teardown(async () => {
  await host.down();
  await ctx.ovsnet.kill('SIGTERM');
});

await driverScenarios(t, ctx, { ipam: false, octet: 42 });
