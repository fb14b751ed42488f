/**
 * The host end of a container's veth takes no part in the host's IP stack: a
 * "container" namespace asking ARP for an address the host holds gets no answer from it, IP sent
 * to it is not delivered to the host, and it has no IPv6 address. Real netlink from the link
 * worker, in namespaces of the test's own (test/helpers/host-end-child.ts under unshare -n).
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const CHILD = fileURLToPath(new URL('../../helpers/host-end-child.js', import.meta.url));

t.test('the host end of a veth answers no ARP, takes no IP, has no IPv6 address', async (t) => {
  const r = spawnSync('unshare', ['-n', '--', process.execPath, CHILD], { encoding: 'utf8', timeout: 60_000 });
  t.equal(r.status, 0, `the child ran${r.stderr === '' ? '' : `: ${r.stderr}`}`);
  const out = JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>;
  t.match(out.arping, /Received 0 response/, 'ARP for the host address 10.9.0.1: no reply from the host end');
  t.notMatch(out.neighbour, String(out.hostMac), "the container's neighbour entry never holds the host end's MAC");
  t.equal(out.udpDelivered, false, "UDP sent to the host end's MAC is not delivered to the host");
  t.equal(out.ipv6, '', 'no IPv6 address (no link-local) on the host end');
  t.equal(out.noarp, true, 'NOARP on the host end');
  t.equal(out.hostUp, true, 'and it is up: frames still pass');
});
