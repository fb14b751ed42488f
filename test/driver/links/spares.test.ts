/**
 * Spare veths for real (links/spare-ops.ts): a pair parked and adopted again over netlink in a
 * network namespace of the test's own (the child runs under `unshare -n`).
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const CHILD = fileURLToPath(new URL('../../helpers/spares-child.js', import.meta.url));

t.test('a released pair is parked (down, renamed, spare alias) and adopted (renamed, MTU, MAC, alias, up)', async (t) => {
  const r = spawnSync('unshare', ['-n', '--', process.execPath, CHILD], { encoding: 'utf8', timeout: 30_000 });
  t.equal(r.status, 0, `exit status 0${r.stderr === '' ? '' : `: ${r.stderr}`}`);
  const out = JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>;
  t.equal(out.parked, true);
  t.match(out.afterPark, {
    old: false,
    alias: 'ovsnet-spare',
    host: /ovsph0@ovspc0: <(?![^>]*\bUP\b)[^>]*>.* state DOWN/,
    container: /ovspc0@ovsph0: <(?![^>]*\bUP\b)[^>]*>/,
  });
  t.match(out.afterAdopt, {
    spareLeft: false,
    sameLinks: true,
    alias: `ovsnet:${'f'.repeat(64)}`,
    host: /lsh1@lsc1: <[^>]*NOARP[^>]*\bUP\b[^>]*> mtu 1300 .*addrgenmode none/,
    container: /lsc1@lsh1: .* mtu 1300 .*link\/ether 02:00:00:00:00:43/,
    txChecksum: 'off',
  });
  t.equal(out.notPair, false, 'two links that are not a pair are not parked');
  t.equal(out.notPairLeft, true, 'and left as they were');
  t.match(out.missingSpare, /cannot adopt spare veth ovsph2: it is no longer a veth pair/);
  t.equal(out.afterMissing, false, 'a failed adoption creates nothing');
});
