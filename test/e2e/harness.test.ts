/**
 * The host harness leaves nothing behind: namespaces, mounts, cgroups, links, routes and
 * iptables of this machine are the same before a host is made and after it is torn down.
 */
import fs from 'node:fs';
import t from 'tap';
import { DockerHost, IMAGE, run } from '../harness/host.js';

async function snapshot(name: string): Promise<Record<string, string>> {
  const out = async (cmd: string, args: string[]) => (await run(cmd, args)).stdout;
  const cgroups = fs.readdirSync('/sys/fs/cgroup').flatMap((c) => {
    try {
      return fs
        .readdirSync(`/sys/fs/cgroup/${c}`)
        .filter((d) => d === name)
        .map((d) => `${c}/${d}`);
    } catch {
      return [];
    }
  });
  return {
    netns: (await out('ip', ['netns', 'list']))
      .split('\n')
      .filter((l) => l.startsWith(name))
      .join('\n'),
    mounts: fs
      .readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .filter((l) => l.includes(name))
      .join('\n'),
    cgroups: cgroups.join('\n'),
    links: (await out('ip', ['-o', 'link', 'show']))
      .replace(/\s+link\/.*$/gm, '')
      .split('\n')
      .map((l) => l.split(':')[1]?.trim())
      .sort()
      .join(' '),
    addresses: (await out('ip', ['-o', 'addr', 'show']))
      .split('\n')
      .map((l) => l.split(/\s+/).slice(1, 4).join(' '))
      .sort()
      .join('\n'),
    routes: (await out('ip', ['route', 'show'])).split('\n').sort().join('\n'),
    iptables: (await out('iptables-save', [])).replace(/^#.*$/gm, '').replace(/\[\d+:\d+\]/g, ''),
    dir: String(fs.existsSync(`/tmp/ovsnet-host-${name}`)),
  };
}

t.test('up, use, down: nothing left', async (t) => {
  const host = await DockerHost.up('harness');
  const before = await snapshot(host.name);
  t.equal(before.netns, host.name, 'the host has its namespace while up');
  await host.dockerOk(['network', 'create', 'hnet']);
  await host.dockerOk(['run', '-d', '--name', 'h1', '--network', 'hnet', IMAGE, 'sleep', '600']);
  t.match(await host.dockerOk(['exec', 'h1', 'hostname']), /^[0-9a-f]{12}$/);
  t.match((await host.exec(['hostname'])).stdout.trim(), host.name, 'the host has its own hostname');
  t.match((await host.exec(['ovs-vsctl', 'show'])).stdout, /^[0-9a-f-]{36}\n/, 'and its own Open vSwitch');
  t.notMatch(before.iptables, /DOCKER/, "the host's Docker rules are not in this namespace");
  // What a killed docker command's message carries: dockerd's goroutines, from the file it names.
  const stacks = await host.stacks();
  t.match(
    stacks,
    /^--- dockerd's goroutines \(\S+goroutine-stacks-\S+\) ---\n([1-9]\d+) goroutines, \d+ waiting for a mutex in libnetwork/,
    stacks,
  );
  t.notMatch(stacks, /deadlocked/, 'an idle dockerd is not said to be deadlocked');
  await host.down();
  const after = await snapshot(host.name);
  t.same(after, { ...before, netns: '', mounts: '', cgroups: '', dir: 'false' }, 'nothing of the host remains, and nothing else changed');
});
