/**
 * An Open vSwitch bridge of a test's own, for testing flows by their effect on traffic without
 * Docker: its own ovsdb-server and ovs-vswitchd in a namespace of the test's (userspace datapath:
 * this machine has no openvswitch module), a gateway internal port holding the gateway addresses
 * with forwarding on, and namespaces as members on access ports. Only the daemons it started
 * (their PID files, in its namespace) are stopped at teardown.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Test } from 'tap';
import { OpenFlow } from '../../src/driver/ovs/openflow.js';
import { exec } from '../../src/lib/exec.js';
import { must, run, type Run } from './host.js';

const SCHEMA = '/usr/share/openvswitch/vswitch.ovsschema';

export interface Member {
  readonly ns: string;
  readonly port: string;
  readonly ofport: number;
  readonly mac: string;
  readonly address: string;
  readonly address6: string;
}

export interface NsSwitch {
  /** The switch's namespace (the gateway port's, where the host's forwarding happens). */
  readonly ns: string;
  /** Its Open vSwitch's run directory: db.sock (OVSDB), br0.mgmt (the bridge's OpenFlow management socket). */
  readonly dir: string;
  inSw(args: readonly string[]): Promise<Run>;
  vsctl(args: readonly string[]): Promise<Run>;
  /** The bridge's OpenFlow port numbers by name. */
  ofports(): Promise<Map<string, number>>;
  /** ovs-ofctl against the bridge, as ovsnet's OpenFlow client runs it. */
  readonly openflow: OpenFlow;
  /** A member: a namespace whose eth0 (checksum offload off: trap 1 of docs/test-hosts.md) is an access port of `tag`. */
  member(name: string, tag: number, address: string, address6: string): Promise<Member>;
  /** The MAC of `dev` in `ns`. */
  macOf(ns: string, dev: string): Promise<string>;
}

/** br0 with gw0 (an internal port of `gateway.tag` holding `gateway.address`/24 and `address6`/64). */
export async function nsSwitch(t: Test, prefix: string, gateway: { tag: number; address: string; address6: string }): Promise<NsSwitch> {
  const id = randomBytes(2).toString('hex');
  const sw = `${prefix}-sw-${id}`;
  const dir = path.join('/tmp', `ovsnet-${prefix}-${id}`);
  const ovsEnv = { OVS_RUNDIR: dir, OVS_DBDIR: dir, OVS_LOGDIR: dir, OVS_SYSCONFDIR: dir };
  const env = { ...process.env, ...ovsEnv };
  const inSw = (args: readonly string[]) => must('ip', ['netns', 'exec', sw, ...args], env);
  const vsctl = (args: readonly string[]) => inSw(['ovs-vsctl', `--db=unix:${dir}/db.sock`, ...args]);
  const namespaces: string[] = [];
  t.teardown(async () => {
    for (const f of ['ovs-vswitchd.pid', 'ovsdb-server.pid']) {
      const file = path.join(dir, f);
      const pid = fs.existsSync(file) ? Number(fs.readFileSync(file, 'utf8').trim()) : NaN;
      if (!Number.isInteger(pid) || !fs.existsSync(`/proc/${pid}/ns/net`)) continue;
      if (fs.statSync(`/proc/${pid}/ns/net`).ino !== fs.statSync(`/run/netns/${sw}`).ino) continue;
      process.kill(pid, 'SIGTERM');
      for (let i = 0; i < 50 && fs.existsSync(`/proc/${pid}/ns`); i++) await new Promise((r) => setTimeout(r, 100));
    }
    for (const ns of [...namespaces, sw]) await run('ip', ['netns', 'del', ns]);
    fs.rmSync(dir, { recursive: true, force: true });
  });
  await must('ip', ['netns', 'add', sw]);
  await must('ip', ['-n', sw, 'link', 'set', 'lo', 'up']);
  fs.mkdirSync(dir, { recursive: true });
  await inSw([
    'sh',
    '-ec',
    `ovsdb-tool create ${dir}/conf.db ${SCHEMA}
     ovsdb-server ${dir}/conf.db --remote=punix:${dir}/db.sock --pidfile=${dir}/ovsdb-server.pid --detach --log-file=${dir}/ovsdb-server.log
     ovs-vsctl --db=unix:${dir}/db.sock --no-wait init
     ovs-vswitchd unix:${dir}/db.sock --pidfile=${dir}/ovs-vswitchd.pid --detach --log-file=${dir}/ovs-vswitchd.log
     ovs-vsctl --db=unix:${dir}/db.sock add-br br0 -- set bridge br0 datapath_type=netdev fail-mode=standalone protocols=OpenFlow10,OpenFlow13,OpenFlow14,OpenFlow15
     ovs-vsctl --db=unix:${dir}/db.sock add-port br0 gw0 tag=${gateway.tag} -- set interface gw0 type=internal
     ip addr add ${gateway.address}/24 dev gw0
     ip addr add ${gateway.address6}/64 dev gw0 nodad
     ip link set gw0 up
     sysctl -qw net.ipv4.ip_forward=1
     sysctl -qw net.ipv6.conf.all.forwarding=1`,
  ]);
  const ofports = async (): Promise<Map<string, number>> => {
    const out = (await inSw(['ovs-ofctl', 'dump-ports-desc', 'br0'])).stdout;
    return new Map([...out.matchAll(/^\s*(\d+)\(([^)]+)\):/gm)].map((m) => [m[2] ?? '', Number(m[1])]));
  };
  const macOf = async (ns: string, dev: string) =>
    (await must('ip', ['-n', ns, '-j', 'link', 'show', dev])).stdout.match(/"address":"([^"]+)"/)?.[1] ?? '';
  // ovsnet's own spawner, so that a file given as stdin reaches ovs-ofctl as one (/dev/stdin).
  const openflow = new OpenFlow((cmd, args, input, timeoutMs) =>
    exec(
      'ip',
      ['netns', 'exec', sw, 'env', ...Object.entries(ovsEnv).map(([k, v]) => `${k}=${v}`), cmd, ...args],
      input,
      timeoutMs ?? 120_000,
    ),
  );
  const member = async (name: string, tag: number, address: string, address6: string): Promise<Member> => {
    const ns = `${prefix}-${name}-${id}`;
    await must('ip', ['netns', 'add', ns]);
    namespaces.push(ns);
    const port = `p-${name}`;
    await must('ip', ['link', 'add', 'eth0', 'netns', ns, 'type', 'veth', 'peer', 'name', port, 'netns', sw]);
    // The switch's end takes no part in the namespace's IP stack (as src/driver/links/host-end.ts
    // does for ovsnet's veths): the userspace datapath reads it over AF_PACKET, the kernel sees its frames too.
    const conf = `net.ipv4.conf.${port}`;
    await inSw(['sysctl', '-qw', `${conf}.forwarding=0`, `${conf}.rp_filter=1`, `${conf}.arp_ignore=8`]);
    await inSw(['sysctl', '-qw', `net.ipv6.conf.${port}.disable_ipv6=1`]);
    await must('ip', ['-n', sw, 'link', 'set', port, 'arp', 'off', 'up']);
    await vsctl(['add-port', 'br0', port, `tag=${tag}`]);
    await must('ip', ['netns', 'exec', ns, 'ethtool', '-K', 'eth0', 'tx', 'off']);
    await must('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    await must('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
    await must('ip', ['-n', ns, 'addr', 'add', `${address}/24`, 'dev', 'eth0']);
    await must('ip', ['-n', ns, 'route', 'add', 'default', 'via', gateway.address]);
    await must('ip', ['-n', ns, 'addr', 'add', `${address6}/64`, 'dev', 'eth0', 'nodad']);
    await must('ip', ['-n', ns, '-6', 'route', 'add', 'default', 'via', gateway.address6]);
    return { ns, port, ofport: (await ofports()).get(port) ?? NaN, mac: await macOf(ns, 'eth0'), address, address6 };
  };
  return { ns: sw, dir, inSw, vsctl, ofports, openflow, member, macOf };
}

/** Whether a TCP connection from namespace `from` to `address`:`port` in `to` gets the listener's greeting. */
export async function connects(from: { ns: string }, to: { ns: string }, address: string, port: number): Promise<boolean> {
  const server = spawn(
    'ip',
    [
      'netns',
      'exec',
      to.ns,
      process.execPath,
      '-e',
      `require('net').createServer((s) => s.end('hi')).listen(${port}, '::', () => console.log('up'))`,
    ],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  );
  try {
    await new Promise<void>((resolve) => server.stdout.once('data', () => resolve()));
    const client = `const s = require('net').connect(${port}, '${address}'); s.setTimeout(1500, () => process.exit(2)); s.on('data', (d) => process.exit(String(d) === 'hi' ? 0 : 3)); s.on('error', () => process.exit(4));`;
    return (await run('ip', ['netns', 'exec', from.ns, process.execPath, '-e', client], { timeoutMs: 5000 })).code === 0;
  } finally {
    server.kill('SIGTERM');
    await new Promise((r) => server.once('close', r));
  }
}
