/**
 * Child of test/cni/netns.test.ts, run inside its "host" namespace: attaches the container end
 * ovc-test to the namespace named by argv[2] as eth0, then prints CHECK's view of it as it is,
 * of an address it lacks and of an interface it lacks, and what a bad namespace path gives.
 */
import { iproute2 } from '../../src/cni/netns.js';

const ctrNs = process.argv[2] ?? '';
const spec = { netns: `/run/netns/${ctrNs}`, device: 'ovc-test', ifname: 'eth0', addresses: ['10.77.0.2/24'], gateways: ['10.77.0.1'] };
await iproute2.attach(spec);
const ok = await iproute2.problem(spec.netns, 'eth0', spec.addresses);
const missing = await iproute2.problem(spec.netns, 'eth0', ['10.77.0.9/24']);
const gone = await iproute2.problem(spec.netns, 'eth9', spec.addresses);
const bad = await iproute2.attach({ ...spec, netns: '/nonexistent/ns' }).then(
  () => 'attached',
  (err: unknown) => (err instanceof Error ? `${(err as { code?: string }).code ?? ''}: ${err.message}` : String(err)),
);
process.stdout.write(JSON.stringify({ ok: ok ?? null, missing, gone, bad }));
