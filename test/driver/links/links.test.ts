/**
 * Links for real: netlink from the link worker thread, in a network namespace of the test's own
 * (the child runs under `unshare -n`), and a clean exit once the worker has closed its sockets.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const CHILD = fileURLToPath(new URL('../../helpers/links-child.js', import.meta.url));

t.test('veth pairs, offloads, addresses and deletion over netlink; the process exits cleanly', async (t) => {
  const r = spawnSync('unshare', ['-n', '--', process.execPath, CHILD], { encoding: 'utf8', timeout: 30_000 });
  t.equal(
    r.status,
    0,
    `exit status 0 (the netlink addon aborts the process if its worker is torn down with sockets open)${r.stderr === '' ? '' : `: ${r.stderr}`}`,
  );
  const out = JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>;
  t.same(out.created, ['lth0', 'ltc0'], 'both ends');
  t.equal(out.alias, `ovsnet:${'e'.repeat(64)}`, "the host end carries ovsnet's alias");
  t.equal(out.aliasIp, out.alias, 'as ip link shows it');
  t.same(out.aliased, [{ name: 'lth0', alias: out.alias }], 'found by its alias');
  t.match(out.notMine, /EEXIST/, 'replace leaves a link carrying another alias alone');
  t.equal(out.takenSaid, true, 'a name held by another link is told apart (EEXIST)');
  t.equal(out.otherSaid, false, 'and no other failure is taken for it');
  t.ok(out.hostUp, 'the host end is up');
  t.match(out.containerEnd, /mtu 1400 .*link\/ether 02:00:00:00:00:42/, 'the container end has the MTU and the MAC');
  t.equal(out.txChecksum, 'off', 'transmit checksum offload off on the container end');
  t.match(out.again, /cannot create veth lth0\/ltc0: .*EEXIST/, 'a second create without replace names the clash');
  t.equal(out.replacedMtu, '1300', 'replace: the leftover went, the new pair is there');
  t.match(out.clash, /cannot create veth lth1\/ltx1/);
  t.equal(out.afterClash, false, 'a failed create leaves no link behind');
  t.equal(out.address, '10.9.8.7/24', 'configureAddress, twice: one address');
  t.match(out.missingAddress, /cannot configure link nope0: it does not exist/);
  t.same(out.afterDelete, { host: false, container: false }, 'deleting the host end takes the pair; deleting again is fine');
  t.same(out.reconciled, ['ovhorphan0001'], "reconcile removed only ovsnet's own orphan veth");
  t.same(
    out.afterReconcile,
    { foreign: true, foreignPeer: true, orphan: false },
    'a host link named ovh123 that ovsnet did not make survives reconcile',
  );
  t.match(out.afterClose, /ovsnet is stopping/, 'no request after close');
});
