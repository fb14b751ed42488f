/**
 * The container side of a CNI attachment in real namespaces (netns.ts): a veth end moved into a
 * namespace the test makes, renamed, addressed, routed and up, and traffic through it; CHECK's
 * view of it, and of it changed; a namespace path that is not one refused, nor the daemon's or
 * PID 1's; a path swapped after the check does not matter (the descriptor is used). Everything is made in
 * two namespaces of the test's own ("host" and "container"); netns.ts runs in a child process
 * in the "host" one (test/helpers/netns-child.ts).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const tag = randomBytes(3).toString('hex');
const hostNs = `cnih-${tag}`;
const ctrNs = `cnic-${tag}`;
const ip = (...args: string[]) => execFileSync('ip', args, { encoding: 'utf8' });
const inCtr = (...args: string[]) => spawnSync('ip', ['netns', 'exec', ctrNs, ...args], { encoding: 'utf8', timeout: 10_000 });

ip('netns', 'add', hostNs);
ip('netns', 'add', ctrNs);
t.teardown(() => {
  spawnSync('ip', ['netns', 'del', hostNs]);
  spawnSync('ip', ['netns', 'del', ctrNs]);
});

t.test('the container end moved into the namespace, configured, and carrying traffic', async (t) => {
  ip('-n', hostNs, 'link', 'add', 'ovh-test', 'type', 'veth', 'peer', 'name', 'ovc-test');
  ip('-n', hostNs, 'addr', 'add', '10.77.0.1/24', 'dev', 'ovh-test');
  ip('-n', hostNs, 'link', 'set', 'ovh-test', 'up');
  const child = spawnSync(
    'ip',
    ['netns', 'exec', hostNs, process.execPath, fileURLToPath(new URL('../helpers/netns-child.js', import.meta.url)), ctrNs],
    { encoding: 'utf8', timeout: 30_000 },
  );
  t.equal(child.status, 0, child.stderr);
  const seen = JSON.parse(child.stdout) as Record<'missing' | 'gone' | 'bad' | 'own' | 'pid1' | 'mnt', string> & { ok: string | null };
  t.equal(seen.ok, null, 'CHECK: as ADD left it');
  t.match(seen.missing, /eth0 in \/tmp\/ovsnet-swap-cnic-.* lacks 10\.77\.0\.9\/24/);
  t.match(seen.gone, /eth9 is not in/);
  t.match(seen.bad, /^CNI_ENV_INVALID: CNI_NETNS "\/nonexistent\/ns" does not exist: give the container's network namespace/);
  t.match(seen.own, /^CNI_ENV_INVALID: CNI_NETNS "\/proc\/self\/ns\/net" is the ovsnet daemon's own network namespace/);
  t.match(
    seen.pid1,
    /^CNI_ENV_INVALID: CNI_NETNS "\/proc\/1\/ns\/net" (is PID 1's network namespace \(the host's\)|cannot be reached \(EACCES\))/,
  ); // PID 1 may be out of reach in a sandbox
  t.match(seen.mnt, /^CNI_ENV_INVALID: CNI_NETNS ".*\/ns\/mnt" is a mnt namespace, not a network namespace/);
  t.not(spawnSync('ip', ['-n', hostNs, 'link', 'show', 'eth0']).status, 0, 'the path swapped after the check: nothing in the host');
  t.match(inCtr('ip', '-o', '-4', 'addr', 'show', 'eth0').stdout, /inet 10\.77\.0\.2\/24/, 'renamed and addressed');
  t.match(inCtr('ip', 'route').stdout, /default via 10\.77\.0\.1 dev eth0/, 'default route');
  t.equal(inCtr('busybox', 'ping', '-c', '1', '-W', '2', '10.77.0.1').status, 0, 'the host end answers through it');
});
