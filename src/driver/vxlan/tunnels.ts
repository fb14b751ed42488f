/**
 * VXLAN tunnels: for every logical network this host is a member of, one OVS `type=vxlan` port
 * per live peer that is a member too (key = the VNI, access port of the network's local VLAN
 * tag, so traffic of different VNIs never mixes). Tunnel ports are `protected`: OVS never
 * forwards from one to another, so a full mesh floods without loops (split horizon).
 *
 * Tunnels follow three inputs: the host registry (peers come and go with their leases), the
 * logical network records and their members' keys, and this host's networks. Every change schedules one
 * sync that diffs the wanted ports against OVS's; syncs never overlap and coalesce.
 */
import { createHash } from 'node:crypto';
import { messageOf } from '../../lib/errors.js';
import type { Logger } from '../../lib/log.js';
import type { HostRecord } from '../../cluster/hosts.js';
import type { Store } from '../../store/types.js';
import type { LogicalNetwork, NetworkRecord } from '../model/records.js';
import { FollowedLogical } from '../records/logical-follow.js';
import type { OvsApi } from '../effects/deps.js';
import { portOf, remoteOf, roleOf, tunnelIds, VXLAN_PORT } from '../ovs/external-ids.js';

export interface Tunnel {
  readonly name: string;
  readonly bridge: string;
  readonly tag: number;
  readonly vni: number;
  readonly peer: string;
  readonly remoteIp: string;
}

/** Names made so far (a host syncs every tunnel on every change: one SHA-1 per peer each time). */
const names = new Map<string, string>();

/** `ovx` + the VNI in hex + 6 hex of the peer's name: 15 characters, unique per (VNI, peer). */
export function tunnelName(vni: number, peer: string): string {
  const key = `${vni}/${peer}`;
  let name = names.get(key);
  if (name === undefined) {
    if (names.size >= 100_000) names.clear(); // bounded: peers come and go
    name = `ovx${vni.toString(16).padStart(6, '0')}${createHash('sha1').update(peer).digest('hex').slice(0, 6)}`;
    names.set(key, name);
  }
  return name;
}

/** The tunnels this host should have. Pure. */
export function wantedTunnels(
  self: string,
  networks: readonly NetworkRecord[],
  logical: ReadonlyMap<string, LogicalNetwork>,
  hosts: ReadonlyMap<string, HostRecord>,
): Tunnel[] {
  const out: Tunnel[] = [];
  for (const n of networks) {
    if (n.logical === undefined || n.vni === undefined) continue;
    const members = logical.get(n.logical)?.members ?? {};
    for (const peer of Object.keys(members).sort()) {
      const host = hosts.get(peer);
      if (peer === self || host === undefined || host.vtepIp === '') continue;
      out.push({ name: tunnelName(n.vni, peer), bridge: n.bridge, tag: n.tag, vni: n.vni, peer, remoteIp: host.vtepIp });
    }
  }
  return out;
}

export interface TunnelDeps {
  readonly store: Store;
  readonly log: Logger;
  readonly ovs: OvsApi;
  readonly self: () => { readonly name: string; readonly vtepIp: string };
  readonly hosts: () => ReadonlyMap<string, HostRecord>;
  /**
   * Whether hosts() holds the registry as loaded (absent: always). Until then no sync runs: with
   * no peers known yet it would take every tunnel down, to put it back once they load.
   */
  readonly hostsLoaded?: () => boolean;
  /** This host's networks. */
  readonly networks: () => Promise<NetworkRecord[]>;
  /** OVSNET_VXLAN_PORT (absent: 4789). */
  readonly vxlanPort?: number;
  /**
   * Called after tunnel ports were added, until it succeeds: on the userspace datapath, waits
   * for ovs-vswitchd to apply them and drops its cached flows (see Vswitchd.purgeFlows).
   */
  readonly afterAdding?: () => Promise<void>;
  /** Told after tunnel ports came or went (the groups of logical networks route through them). */
  readonly onPortsChanged?: () => void;
}

export class Tunnels {
  private readonly logical: FollowedLogical;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  /** Ports were added and afterAdding has not succeeded since. */
  private addedUnsettled = false;
  /** Tunnel ports as of the last sync (for metrics). */
  count = 0;
  /** Resolves when the sync running or scheduled now has finished (for tests and callers). */
  settled: Promise<void> = Promise.resolve();

  constructor(private readonly deps: TunnelDeps) {
    this.logical = new FollowedLogical(deps.store, deps.log, () => this.schedule());
  }

  /** Loads the logical networks and follows them (again after a lost watch). */
  start(): Promise<void> {
    return this.logical.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.logical.stop();
    await this.settled;
  }

  /** Brings the tunnel ports in line soon; calls made while a sync runs make one more. */
  schedule(): void {
    if (this.running !== undefined) {
      this.again = true;
      return;
    }
    this.running = this.syncLoop().finally(() => (this.running = undefined));
    this.settled = this.running;
  }

  private async syncLoop(): Promise<void> {
    do {
      this.again = false;
      await this.sync().catch((err: unknown) => {
        this.deps.log.warn({ err }, `cannot bring VXLAN tunnels in line: ${messageOf(err)}; retrying`);
        setTimeout(() => this.schedule(), 1000).unref();
      });
    } while (this.again && !this.stopped);
  }

  private async sync(): Promise<void> {
    if (this.deps.hostsLoaded?.() === false) return; // the registry's first load schedules one
    const self = this.deps.self();
    const wanted = wantedTunnels(self.name, await this.deps.networks(), this.logical.records, this.deps.hosts());
    const have = (await this.deps.ovs.ownPorts()).filter((p) => roleOf(p) === 'tunnel');
    const byName = new Map(wanted.map((w) => [w.name, w]));
    const added: string[] = [];
    const removed: string[] = [];
    const udp = this.deps.vxlanPort ?? VXLAN_PORT;
    for (const port of have) {
      const w = byName.get(port.name);
      if (w !== undefined && remoteOf(port) === w.remoteIp && port.tag === w.tag && portOf(port) === udp) continue;
      await this.deps.ovs.deletePort(port.name);
      removed.push(port.name);
    }
    const kept = new Set(have.filter((p) => !removed.includes(p.name)).map((p) => p.name));
    for (const w of wanted) {
      if (kept.has(w.name)) continue;
      await this.deps.ovs.addPort(w.bridge, w.name, {
        tag: w.tag,
        type: 'vxlan',
        protected: true,
        options: {
          remote_ip: w.remoteIp,
          key: String(w.vni),
          ...(self.vtepIp === '' ? {} : { local_ip: self.vtepIp }),
          ...(udp === VXLAN_PORT ? {} : { dst_port: String(udp) }),
        },
        externalIds: tunnelIds(w.peer, w.remoteIp, w.vni, udp),
      });
      added.push(w.name);
    }
    this.count = wanted.length;
    if (added.length + removed.length > 0) this.deps.log.info({ added, removed, tunnels: wanted.length }, 'VXLAN tunnels changed');
    if (added.length + removed.length > 0) this.deps.onPortsChanged?.();
    if (added.length > 0) this.addedUnsettled = true;
    if (this.addedUnsettled && this.deps.afterAdding !== undefined) {
      await this.deps.afterAdding();
      this.addedUnsettled = false;
    }
  }
}
