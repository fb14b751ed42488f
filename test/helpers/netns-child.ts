/**
 * Child of test/cni/netns.test.ts, run inside its "host" namespace: opens the namespace named by
 * argv[2] through a symlink, repoints the symlink at its own namespace (a path swapped after the
 * check), attaches the container end ovc-test as eth0 by the descriptor, then prints CHECK's view
 * of it as it is, of an address it lacks and of an interface it lacks, and what namespace paths
 * that are not a container's give.
 */
import fs from 'node:fs';
import { iproute2, openNetns } from '../../src/cni/netns.js';

const ctrNs = process.argv[2] ?? '';
const link = `/tmp/ovsnet-swap-${ctrNs}`;
fs.rmSync(link, { force: true });
fs.symlinkSync(`/run/netns/${ctrNs}`, link);
const handle = openNetns(link);
fs.rmSync(link);
fs.symlinkSync('/proc/self/ns/net', link); // swapped after the check: must not matter
const spec = { netns: link, device: 'ovc-test', ifname: 'eth0', addresses: ['10.77.0.2/24'], gateways: ['10.77.0.1'] };
await iproute2.attach({ ...spec, via: handle.path });
const ok = await iproute2.problem(spec.netns, 'eth0', spec.addresses, handle.path);
const missing = await iproute2.problem(spec.netns, 'eth0', ['10.77.0.9/24'], handle.path);
const gone = await iproute2.problem(spec.netns, 'eth9', spec.addresses, handle.path);
handle.close();
fs.rmSync(link);
const refusal = (p: string) => {
  try {
    openNetns(p).close();
    return 'opened';
  } catch (err) {
    return `${(err as { code?: string }).code ?? ''}: ${(err as Error).message}`;
  }
};
process.stdout.write(
  JSON.stringify({
    ok: ok ?? null,
    missing,
    gone,
    bad: refusal('/nonexistent/ns'),
    own: refusal('/proc/self/ns/net'),
    pid1: refusal('/proc/1/ns/net'),
    mnt: refusal(`/proc/${process.pid}/ns/mnt`),
  }),
);
