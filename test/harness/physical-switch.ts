/**
 * A VLAN-aware "physical switch" for the uplink tests (OVSNET_UPLINK): an Open vSwitch bridge
 * of its own (own ovsdb-server and ovs-vswitchd, userspace datapath) in a namespace of the
 * test's. Simulated hosts get a trunk port each (a veth whose host end is the host's uplink);
 * a "physical host" without ovsnet gets an access port of one VLAN (a namespace of its own).
 * No 8021q module or bridge VLAN filtering is needed. docs/test-hosts.md says why each step is
 * there; this module is the switch's part of that page.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { must, run, type DockerHost, type Run } from './host.js';

const SCHEMA = '/usr/share/openvswitch/vswitch.ovsschema';

export class PhysicalSwitch {
  /** Namespaces of the physical hosts on access ports. */
  private readonly stations: string[] = [];

  private constructor(
    readonly netns: string,
    readonly dir: string,
  ) {}

  static async up(prefix: string): Promise<PhysicalSwitch> {
    const tag = randomBytes(2).toString('hex');
    const sw = new PhysicalSwitch(`${prefix}-sw-${tag}`.slice(0, 15), path.join('/tmp', `ovsnet-sw-${prefix}-${tag}`));
    try {
      await must('ip', ['netns', 'add', sw.netns]);
      await must('ip', ['-n', sw.netns, 'link', 'set', 'lo', 'up']);
      fs.mkdirSync(sw.dir, { recursive: true });
      const d = sw.dir;
      await sw.inside([
        'sh',
        '-ec',
        `ovsdb-tool create ${d}/conf.db ${SCHEMA}
         ovsdb-server ${d}/conf.db --remote=punix:${d}/db.sock --pidfile=${d}/ovsdb-server.pid --detach --log-file=${d}/ovsdb-server.log
         ovs-vsctl --db=unix:${d}/db.sock --no-wait init
         ovs-vswitchd unix:${d}/db.sock --pidfile=${d}/ovs-vswitchd.pid --detach --log-file=${d}/ovs-vswitchd.log
         ovs-vsctl --db=unix:${d}/db.sock add-br sw0 -- set bridge sw0 datapath_type=netdev fail-mode=standalone`,
      ]);
    } catch (err) {
      await sw.down();
      throw err;
    }
    return sw;
  }

  /** A command in the switch's namespace, with its own OVS directories. */
  private async inside(args: readonly string[]): Promise<Run> {
    const env = { ...process.env, OVS_RUNDIR: this.dir, OVS_DBDIR: this.dir, OVS_LOGDIR: this.dir, OVS_SYSCONFDIR: this.dir };
    return must('ip', ['netns', 'exec', this.netns, ...args], env);
  }

  private vsctl(args: readonly string[]): Promise<Run> {
    return this.inside(['ovs-vsctl', `--db=unix:${this.dir}/db.sock`, ...args]);
  }

  /**
   * Cables `host` to a trunk port (every VLAN, untagged as VLAN 0): a veth whose end in the host
   * is `iface` (up, with `address` if given). Returns the switch's port name.
   */
  async trunk(host: DockerHost, iface: string, address?: string): Promise<string> {
    const port = `t-${host.name.slice(-10)}`;
    await must('ip', ['link', 'add', iface, 'netns', host.name, 'type', 'veth', 'peer', 'name', port, 'netns', this.netns]);
    await must('ip', ['-n', this.netns, 'link', 'set', port, 'up']);
    await this.vsctl(['add-port', 'sw0', port]);
    await must('ip', ['-n', host.name, 'link', 'set', iface, 'up']);
    if (address !== undefined) await must('ip', ['-n', host.name, 'addr', 'add', address, 'dev', iface]);
    return port;
  }

  /**
   * A physical host on an access port of `vlan`: a namespace whose eth0 holds `addresses`
   * (transmit checksum offload off: the switch's userspace datapath does not complete checksums).
   * Returns the namespace's name.
   */
  async station(vlan: number, addresses: readonly string[]): Promise<string> {
    // Numbered: a VLAN tag freed by one test may be another's next.
    const ns = `${this.netns.slice(0, 10)}-a${vlan}-${this.stations.length + 1}`;
    await must('ip', ['netns', 'add', ns]);
    this.stations.push(ns);
    const port = `a-${vlan}-${this.stations.length}`;
    await must('ip', ['link', 'add', 'eth0', 'netns', ns, 'type', 'veth', 'peer', 'name', port, 'netns', this.netns]);
    await must('ip', ['-n', this.netns, 'link', 'set', port, 'up']);
    await this.vsctl(['add-port', 'sw0', port, `tag=${vlan}`]);
    await must('ip', ['netns', 'exec', ns, 'ethtool', '-K', 'eth0', 'tx', 'off']);
    await must('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
    for (const a of addresses) await must('ip', ['-n', ns, 'addr', 'add', a, 'dev', 'eth0']);
    return ns;
  }

  /**
   * What tcpdump (-e: link-level headers, so 802.1Q tags show) sees on a switch port while
   * `during` runs: up to `count` frames matching `filter`, one per line.
   */
  async capture(port: string, filter: readonly string[], during: () => Promise<unknown>, count = 20): Promise<string[]> {
    const child = spawn(
      'ip',
      ['netns', 'exec', this.netns, 'timeout', '15', 'tcpdump', '-l', '-e', '-n', '-c', String(count), '-i', port, ...filter],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const done = new Promise((resolve) => child.on('close', resolve));
    for (let i = 0; i < 100 && !err.includes('listening on'); i++) await new Promise((r) => setTimeout(r, 50));
    if (!err.includes('listening on')) throw new Error(`tcpdump did not start on ${port}: ${err}`);
    await during();
    await new Promise((r) => setTimeout(r, 300));
    child.kill('SIGINT');
    await done;
    return out.split('\n').filter((l) => l !== '');
  }

  /** Stops the switch's OVS (by recorded PID, checked to be in its namespace), removes its namespaces and files. */
  async down(): Promise<void> {
    const ino = (p: string) => {
      try {
        return fs.statSync(p).ino;
      } catch {
        return -1;
      }
    };
    for (const f of ['ovs-vswitchd.pid', 'ovsdb-server.pid']) {
      const pid = Number(fs.existsSync(path.join(this.dir, f)) ? fs.readFileSync(path.join(this.dir, f), 'utf8').trim() : NaN);
      if (!Number.isInteger(pid) || ino(`/proc/${pid}/ns/net`) !== ino(`/run/netns/${this.netns}`)) continue;
      process.kill(pid, 'SIGTERM');
      for (let i = 0; i < 50 && fs.existsSync(`/proc/${pid}/ns`); i++) await new Promise((r) => setTimeout(r, 100));
    }
    for (const ns of [...this.stations, this.netns]) await run('ip', ['netns', 'del', ns]);
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
