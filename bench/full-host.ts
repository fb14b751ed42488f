/**
 * A full host among the 200-host benchmark's light agents: its tunnels drive a
 * real Open vSwitch (ovsdb-server and ovs-vswitchd, userspace datapath) in a simulated host
 * (test/harness/host.sh), through ovsnet's OVSDB client and ovs-vswitchd control socket as the
 * daemon assembles them (src/daemon/assemble.ts: after adding tunnels, wait until applied and
 * drop cached flows). Every OVS call it makes is timed, so a tunnel's way can be followed from
 * the watch event that brought it to the port in OVSDB and to ovs-vswitchd having applied it;
 * ovs-vswitchd's RSS and CPU time come from /proc.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { OvsApi } from '../src/driver/effects/deps.js';
import { endpointIds, tunnelIds, VXLAN_PORT } from '../src/driver/ovs/external-ids.js';
import { Ovsdb } from '../src/driver/ovs/ovsdb.js';
import { Vswitchd } from '../src/driver/ovs/vswitchd.js';
import { tunnelName } from '../src/driver/vxlan/tunnels.js';
import { DockerHost, must } from '../test/harness/host.js';
import { agent, type Agent } from './agent.js';
import { median } from './stats.js';

const BRIDGE = 'br0';
const TICK_MS = 10; // /proc/PID/stat counts CPU time in clock ticks of 1/100 s (USER_HZ)

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, ok: () => boolean, limitMs: number): Promise<void> {
  const t0 = performance.now();
  while (!ok()) {
    if (performance.now() - t0 > limitMs) throw new Error(`${what}: not within ${limitMs} ms`);
    await sleep(5);
  }
}

/** A tunnel's way on the full host, in ms from the watch event that completed what it needed. */
export interface TunnelAdd {
  readonly inOvsdbMs: number;
  readonly appliedMs: number;
  /** From the moment the peer started (registering, joining) to applied. */
  readonly fromStartMs: number;
}

export interface SyncFigures {
  readonly peers: number;
  /** Joining (registration, membership, tunnels started) until every peer's port is in OVSDB. */
  readonly inOvsdbMs: number;
  /** ... and until ovs-vswitchd applied them. */
  readonly appliedMs: number;
  readonly portsOnBridge: number;
  readonly rssMiB: number;
  /** ovs-vswitchd's CPU time while the host joined and its ports were applied. */
  readonly syncCpuMs: number;
  /** ovs-vswitchd's CPU time per second with nothing changing, over 10 s. */
  readonly idleCpuMsPerS: number;
  /** One tunnel's OVS calls as a full sync makes them (ownPorts + addPort; a peer's sync: addPort alone), quiet, median of 5 ... */
  readonly tunnelOvsMs: number;
  /** ... and until ovs-vswitchd applied it and dropped its cached flows (afterAdding). */
  readonly tunnelAppliedMs: number;
  /** A Join's OVS calls on this bridge (deletePort + addPort of a veth's host end), median of 5 ... */
  readonly joinOvsMs: number;
  /** ... and until ovs-vswitchd applied that port. */
  readonly joinAppliedMs: number;
}

export class FullHost {
  /** When each port's addPort returned (performance.now()), and when the watch had last delivered as it was called. */
  private readonly added = new Map<string, { at: number; eventAt: number }>();
  /** When each waitApplied returned. */
  private readonly applied: number[] = [];
  private current: Agent | undefined;
  readonly ovs: OvsApi;

  private constructor(
    readonly host: DockerHost,
    private readonly db: Ovsdb,
    private readonly vswitchd: Vswitchd,
  ) {
    this.ovs = {
      ensureBridge: (b, d, mode) => db.ensureBridge(b, d, mode),
      failMode: (b) => db.failMode(b),
      setFailMode: (b, mode) => db.setFailMode(b, mode),
      flowRestoreWait: () => db.flowRestoreWait(),
      setFlowRestoreWait: (on) => db.setFlowRestoreWait(on),
      bridgeExists: (b) => db.bridgeExists(b),
      addPort: async (b, name, opts) => {
        const eventAt = this.current?.seen.lastEventAt ?? 0;
        await db.addPort(b, name, opts);
        this.added.set(name, { at: performance.now(), eventAt });
      },
      deletePort: (name) => db.deletePort(name),
      ownPorts: () => db.ownPorts(),
      waitApplied: async () => {
        await db.waitApplied();
        this.applied.push(performance.now());
      },
      setMtu: (name, mtu) => db.setMtu(name, mtu),
    };
  }

  /** A simulated host (its own namespaces, OVS and dockerd; only OVS is used) with an empty br0 on the userspace datapath. */
  static async up(): Promise<FullHost> {
    const host = await DockerHost.up('benchfull');
    const run = path.join(host.dir, 'run', 'openvswitch');
    const db = new Ovsdb(`unix:${run}/db.sock`, 30_000);
    const full = new FullHost(host, db, new Vswitchd(run, 30_000));
    try {
      // Standalone, as ovsnet makes it without OpenFlow access: only tunnels are measured here.
      await full.ovs.ensureBridge(BRIDGE, 'netdev', 'standalone');
    } catch (err) {
      await full.down();
      throw err;
    }
    return full;
  }

  /** ovs-vswitchd's version line, for the conditions. */
  async version(): Promise<string> {
    return (await this.vswitchd.command('version')).split('\n')[0] ?? '';
  }

  private pid(): number {
    return Number(fs.readFileSync(path.join(this.host.dir, 'ovs-vswitchd.pid'), 'utf8').trim());
  }

  private rssMiB(): number {
    const kb = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${this.pid()}/status`, 'utf8'))?.[1];
    return Number(kb) / 1024;
  }

  /** ovs-vswitchd's CPU time so far (user + system, every thread), ms. */
  private cpuMs(): number {
    const stat = fs.readFileSync(`/proc/${this.pid()}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // fields from the 3rd (state) on
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS; // utime, stime: fields 14 and 15
  }

  async portsOnBridge(): Promise<number> {
    const [sel] = await this.db.transact([{ op: 'select', table: 'Bridge', where: [['name', '==', BRIDGE]], columns: ['ports'] }]);
    const ports = (sel?.rows as { ports?: unknown }[] | undefined)?.[0]?.ports;
    // A set of one is sent as the bare ["uuid", ...] (RFC 7047 §5.1).
    if (!Array.isArray(ports)) throw new Error(`no bridge ${BRIDGE} on the full host`);
    return ports[0] === 'set' && Array.isArray(ports[1]) ? ports[1].length : 1;
  }

  /**
   * Every tunnel interface ovs-vswitchd has made (an OpenFlow port number, no error): checks that
   * the ports counted are live in ovs-vswitchd, not only rows in OVSDB.
   */
  private async checkLive(want: number): Promise<void> {
    const [sel] = await this.db.transact([
      { op: 'select', table: 'Interface', where: [['type', '==', 'vxlan']], columns: ['name', 'ofport', 'error'] },
    ]);
    const rows = (sel?.rows ?? []) as { name: string; ofport: unknown; error: unknown }[];
    const live = rows.filter((r) => typeof r.ofport === 'number' && r.ofport > 0 && typeof r.error !== 'string');
    if (live.length !== want) {
      const bad = rows.find((r) => !live.includes(r));
      throw new Error(`${live.length} of ${want} tunnels are live in ovs-vswitchd; e.g. ${JSON.stringify(bad)}`);
    }
  }

  /** The first waitApplied that returned at or after `t`. */
  private appliedAfter(t: number): number | undefined {
    return this.applied.find((a) => a >= t);
  }

  /**
   * Joins the logical network every agent at `peerVteps` is a member of; resolves with the
   * initial sync's figures once every peer's tunnel is applied.
   */
  async join(endpoints: string[], logical: string, vni: number, peerVteps: string[]): Promise<SyncFigures> {
    const want = peerVteps.map((p) => tunnelName(vni, p) ?? '');
    const cpu0 = this.cpuMs();
    const t0 = performance.now();
    this.current = await agent(endpoints, {
      index: 0xfff0,
      name: 'scale-full',
      logical,
      vni,
      ovs: this.ovs,
      afterAdding: async () => {
        await this.ovs.waitApplied();
        await this.vswitchd.purgeFlows();
      },
    });
    await until('the full host has every peer in OVSDB', () => want.every((w) => this.added.has(w)), 300_000);
    const inOvsdb = Math.max(...want.map((w) => this.added.get(w)?.at ?? 0));
    await until('the full host applied every peer', () => this.appliedAfter(inOvsdb) !== undefined, 60_000);
    const appliedAt = this.appliedAfter(inOvsdb) ?? NaN;
    const syncCpuMs = this.cpuMs() - cpu0;
    await this.checkLive(want.length);
    await sleep(1000);
    const idle0 = this.cpuMs();
    await sleep(10_000);
    const idleCpuMsPerS = (this.cpuMs() - idle0) / 10;
    const tunnel = await this.tunnelCost(vni);
    const join = await this.joinCost();
    return {
      peers: peerVteps.length,
      inOvsdbMs: inOvsdb - t0,
      appliedMs: appliedAt - t0,
      portsOnBridge: await this.portsOnBridge(),
      rssMiB: this.rssMiB(),
      syncCpuMs,
      idleCpuMsPerS,
      ...tunnel,
      ...join,
    };
  }

  /** Waits until the tunnel to the peer at `peer` is applied; its way from the watch event and from `startedAt` (performance.now()). */
  async tunnelAdded(vni: number, peer: string, startedAt: number): Promise<TunnelAdd> {
    const name = tunnelName(vni, peer) ?? '';
    await until(`the full host's tunnel to ${peer}`, () => this.added.has(name), 60_000);
    const { at, eventAt } = this.added.get(name) ?? { at: NaN, eventAt: NaN };
    await until(`the full host applied its tunnel to ${peer}`, () => this.appliedAfter(at) !== undefined, 60_000);
    const appliedAt = this.appliedAfter(at) ?? NaN;
    return { inOvsdbMs: at - eventAt, appliedMs: appliedAt - eventAt, fromStartMs: appliedAt - startedAt };
  }

  /**
   * One more tunnel's OVS calls as Tunnels' full sync makes them (a peer's sync: the addPort
   * alone), with nothing else running (in the rounds, the agents sharing this process handle the
   * same change at the same time): median of 5.
   */
  private async tunnelCost(vni: number): Promise<{ tunnelOvsMs: number; tunnelAppliedMs: number }> {
    const calls: number[] = [];
    const applied: number[] = [];
    const name = tunnelName(vni, '10.255.255.1') ?? '';
    for (let i = 0; i < 5; i++) {
      try {
        const t0 = performance.now();
        await this.db.ownPorts();
        await this.db.addPort(BRIDGE, name, {
          tag: 1,
          type: 'vxlan',
          protected: true,
          options: { remote_ip: '10.255.255.1', key: String(vni), local_ip: '10.255.255.2' },
          externalIds: tunnelIds('scale-bench-quiet', '10.255.255.1', vni, VXLAN_PORT),
        });
        calls.push(performance.now() - t0);
        await this.db.waitApplied();
        await this.vswitchd.purgeFlows();
        applied.push(performance.now() - t0);
      } finally {
        await this.db.deletePort(name);
        await this.db.waitApplied();
      }
    }
    return { tunnelOvsMs: median(calls), tunnelAppliedMs: median(applied) };
  }

  /** A Join's OVS calls on br0 as plugEndpoint makes them, for a veth made in the host: median of 5. */
  private async joinCost(): Promise<{ joinOvsMs: number; joinAppliedMs: number }> {
    const calls: number[] = [];
    const applied: number[] = [];
    const veth = 'ovbenchjoin0';
    for (let i = 0; i < 5; i++) {
      await must('ip', ['-n', this.host.name, 'link', 'add', veth, 'type', 'veth', 'peer', 'name', 'ovbenchjoin1']);
      try {
        const t0 = performance.now();
        await this.db.deletePort(veth);
        await this.db.addPort(BRIDGE, veth, { tag: 1, externalIds: endpointIds('bench', `join${i}`) });
        calls.push(performance.now() - t0);
        await this.db.waitApplied();
        applied.push(performance.now() - t0);
      } finally {
        await this.db.deletePort(veth);
        await this.db.waitApplied();
        await must('ip', ['-n', this.host.name, 'link', 'del', veth]);
      }
    }
    return { joinOvsMs: median(calls), joinAppliedMs: median(applied) };
  }

  /** Leaves (the agent stops, deregistering) and deletes every tunnel port, for the next round. */
  async leave(): Promise<void> {
    await this.current?.stop();
    this.current = undefined;
    for (const p of await this.db.ownPorts()) await this.db.deletePort(p.name);
    await this.db.waitApplied();
    this.added.clear();
    this.applied.length = 0;
  }

  async down(): Promise<void> {
    await this.current?.stop().catch(() => undefined);
    this.db.close();
    await this.host.down();
  }
}
