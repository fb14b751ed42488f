/**
 * The container side of a CNI attachment in real namespaces (netns.ts): a veth end moved into a
 * namespace the test makes, renamed, addressed, routed and up, and traffic through it; CHECK's
 * view of it, and of it changed; a namespace path that is not one refused. Everything is made in
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
  const seen = JSON.parse(child.stdout) as { ok: string | null; missing: string; gone: string; bad: string };
  t.equal(seen.ok, null, 'CHECK: as ADD left it');
  t.match(seen.missing, /eth0 in \/run\/netns\/cnic-.* lacks 10\.77\.0\.9\/24/);
  t.match(seen.gone, /eth9 is not in/);
  t.match(seen.bad, /^CNI_ENV_INVALID: CNI_NETNS "\/nonexistent\/ns" is not an existing network namespace path/);
  t.match(inCtr('ip', '-o', '-4', 'addr', 'show', 'eth0').stdout, /inet 10\.77\.0\.2\/24/, 'renamed and addressed');
  t.match(inCtr('ip', 'route').stdout, /default via 10\.77\.0\.1 dev eth0/, 'default route');
  t.equal(inCtr('busybox', 'ping', '-c', '1', '-W', '2', '10.77.0.1').status, 0, 'the host end answers through it');
});
