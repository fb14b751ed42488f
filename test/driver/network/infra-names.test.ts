/**
 * Infra ports are named as gateways and veths are: two networks whose IDs share their first 12
 * characters get two ports, and removing one network leaves the other's port and address.
 */
import t from 'tap';
import { cluster, create } from '../../helpers/logical-hosts.js';

const A = `ab12cd34ef56${'a'.repeat(52)}`;
const B = `ab12cd34ef56${'b'.repeat(52)}`;

t.test('two infra networks sharing 12 ID characters: two ports; deleting one leaves the other', async (t) => {
  const [h1] = cluster(t, 1, new Map());
  if (h1 === undefined) throw new Error('one host');
  const links = h1.ovs.links;
  if (links === undefined) throw new Error('the fake OVS has its links');
  await create(h1, A, '10.97.0.0/24', { 'ovsnet.infra': 'true' });
  await create(h1, B, '10.98.0.0/24', { 'ovsnet.infra': 'true' });
  const infra = new Map((await h1.driver.localNetworks()).map((n) => [n.networkId, n.infra]));
  const [a, b] = [infra.get(A), infra.get(B)];
  if (a === undefined || b === undefined) throw new Error('both are infra networks');
  t.equal(a.port, 'oviab12cd34ef56', 'the first keeps the usual name');
  t.not(b.port, a.port, 'the second gets a port of its own');
  t.match(b.port, /^ovi[0-9a-f]{12}$/, 'named by the same scheme');
  t.match(h1.ovs.ports.get(a.port), { externalIds: { 'ovsnet-network': A, 'ovsnet-role': 'infra' } });
  t.match(h1.ovs.ports.get(b.port), { externalIds: { 'ovsnet-network': B, 'ovsnet-role': 'infra' } });
  t.same(links.addresses.get(a.port), a.addresses, "A's port holds only A's address");
  t.same(links.addresses.get(b.port), b.addresses, "B's port holds only B's address");
  await h1.driver.deleteNetwork(A);
  t.notOk(h1.ovs.ports.has(a.port), "A's port is gone");
  t.ok(h1.ovs.ports.has(b.port), "B's port stays");
  t.ok(links.names.has(b.port), 'as a link');
  t.same(links.addresses.get(b.port), b.addresses, 'with its address');
  // Reconcile after a restart repairs B's port under its recorded name, never A's.
  await h1.driver.reconcile();
  t.same(
    [...h1.ovs.ports.keys()].filter((p) => p.startsWith('ovi')),
    [b.port],
  );
});
