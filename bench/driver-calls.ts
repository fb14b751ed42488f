/**
 * A container's network driver calls over the plugin socket, timed: GetCapabilities (the bare
 * HTTP round trip), CreateEndpoint, Join, EndpointOperInfo, Leave + DeleteEndpoint, for `n`
 * endpoints after 20 warm-up ones, `gapMs` apart (40 unless said; 0: back to back, as under
 * churn), on a network of its own. Used by the driver and churn (embedded store) and cluster
 * (etcd) benchmarks.
 */
import path from 'node:path';
import { pluginCall, type DockerHost } from '../test/harness/host.js';

export const DRIVER_CALLS = [
  'NetworkDriver.GetCapabilities',
  'NetworkDriver.CreateEndpoint',
  'NetworkDriver.Join',
  'NetworkDriver.EndpointOperInfo',
  'Leave + DeleteEndpoint',
] as const;
export type DriverCall = (typeof DRIVER_CALLS)[number];

/** Milliseconds of each call, sorted; `octet` picks the network's pool 10.octet.0.0/16. */
export async function timeDriverCalls(host: DockerHost, n: number, octet: number, gapMs = 40): Promise<Map<DriverCall, number[]>> {
  const socket = path.join(host.pluginDir, 'ovsnet.sock');
  const call = async (method: string, body?: unknown) => {
    const r = await pluginCall(socket, method, body);
    if (r.status !== 200) throw new Error(`${method}: ${JSON.stringify(r.body)}`);
  };
  const NetworkID = octet.toString(16).padStart(2, '0').repeat(32);
  await call('NetworkDriver.CreateNetwork', {
    NetworkID,
    Options: {},
    IPv4Data: [{ AddressSpace: 'LocalDefault', Pool: `10.${octet}.0.0/16`, Gateway: `10.${octet}.0.1/16` }],
    IPv6Data: [],
  });
  const ms = new Map<DriverCall, number[]>(DRIVER_CALLS.map((c) => [c, []]));
  const time = async (name: DriverCall, keep: boolean, f: () => Promise<void>) => {
    const t0 = process.hrtime.bigint();
    await f();
    if (keep) ms.get(name)?.push(Number(process.hrtime.bigint() - t0) / 1e6);
  };
  for (let i = 0; i < n + 20; i++) {
    const ids = { NetworkID, EndpointID: `${i.toString(16).padStart(8, '0')}${'e'.repeat(56)}` };
    const keep = i >= 20;
    await time('NetworkDriver.GetCapabilities', keep, () => call('NetworkDriver.GetCapabilities'));
    await time('NetworkDriver.CreateEndpoint', keep, () =>
      call('NetworkDriver.CreateEndpoint', {
        ...ids,
        Interface: { Address: `10.${octet}.${i >> 8}.${(i & 255) + 2}/16`, AddressIPv6: '', MacAddress: '' },
        Options: {},
      }),
    );
    await time('NetworkDriver.Join', keep, () => call('NetworkDriver.Join', { ...ids, SandboxKey: '', Options: {} }));
    await time('NetworkDriver.EndpointOperInfo', keep, () => call('NetworkDriver.EndpointOperInfo', ids));
    await time('Leave + DeleteEndpoint', keep, async () => {
      await call('NetworkDriver.Leave', ids);
      await call('NetworkDriver.DeleteEndpoint', ids);
    });
    // Without spare veths (OVSNET_SPARE_VETHS=0), DeleteEndpoint leaves the veth to the kernel in
    // the background (~20 ms, holding its link lock): a Join right behind it waits for that.
    if (gapMs > 0) await new Promise((r) => setTimeout(r, gapMs));
  }
  await call('NetworkDriver.DeleteNetwork', { NetworkID });
  return new Map([...ms].map(([k, v]) => [k, [...v].sort((a, b) => a - b)]));
}
