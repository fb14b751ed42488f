/**
 * VXLAN tunnels: for every logical network this host is a member of, one OVS `type=vxlan` port
 * per live peer that is a member too (key = the VNI, access port of the network's local VLAN
 * tag, so traffic of different VNIs never mixes). Tunnel ports are `protected`: OVS never
 * forwards from one to another, so a full mesh floods without loops (split horizon).
 *
 * Tunnels follow three inputs: the host registry (peers come and go with their leases), the
 * logical network records and their members' keys, and this host's networks. Syncs never
 * overlap and coalesce; they are of two kinds:
 * - full: every wanted tunnel diffed against OVS's ports, O(peers). At start, after a
 *   follower's new snapshot (a lost or compacted watch), when this host's networks or a logical
 *   network's record change, after an Open vSwitch restart, after any failed sync, and every
 *   FULL_SYNC_MS: a port removed or changed behind ovsnet's back is put right then.
 * - by peer: a peer's registration or member key changed, so only its tunnels are wanted again
 *   and compared with those this host made (no read of OVS), O(networks). Every host gets every
 *   change: at 1,000 hosts a full sync per change made each change cost each host ~1.3 ms, the
 *   cluster's largest cost (docs/benchmarks.md, hosts).
 * Both want tunnels through tunnel-plan.ts, so they agree on what a tunnel is.
 */
import { messageOf } from '../../lib/errors.js';
import type { Logger } from '../../lib/log.js';
import type { HostRecord } from '../../cluster/hosts.js';
import type { Store } from '../../store/types.js';
import type { NetworkRecord } from '../model/records.js';
import { FollowedLogical } from '../records/logical-follow.js';
import type { OvsApi } from '../effects/deps.js';
import { portOf, remoteOf, roleOf, tunnelIds, vniOf, VXLAN_PORT } from '../ovs/external-ids.js';
import { sameTunnel, tunnelName, wantedTunnels, wantedTunnelsTo, type Tunnel } from './tunnel-plan.js';

export { tunnelName, wantedTunnels, type Tunnel } from './tunnel-plan.js';

/** How often a full sync runs with no reason: what mends a tunnel port changed by hand. */
export const FULL_SYNC_MS = 60_000;

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
  /** Between full syncs (absent: FULL_SYNC_MS). */
  readonly fullSyncMs?: number;
}

export class Tunnels {
  private readonly logical: FollowedLogical;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  /** The next sync is a full one: what OVS holds is not known (start, a failure) or may be stale. */
  private full = true;
  /** Peers whose registration or membership changed since the last sync. */
  private peers = new Set<string>();
  /** The tunnels this host made, by peer: the last full sync's, changed by the syncs by peer. */
  private readonly applied = new Map<string, readonly Tunnel[]>();
  /** The peers whose tunnels (as made) are each port: two when two peers share an address. */
  private readonly owners = new Map<string, Set<string>>();
  private timer: NodeJS.Timeout | undefined;
  /** Ports were added and afterAdding has not succeeded since. */
  private addedUnsettled = false;
  /** Tunnel ports as of the last sync (for metrics). */
  count = 0;
  /** Resolves when the sync running or scheduled now has finished (for tests and callers). */
  settled: Promise<void> = Promise.resolve();

  constructor(private readonly deps: TunnelDeps) {
    this.logical = new FollowedLogical(deps.store, deps.log, (peers) => this.peersChanged(peers));
  }

  /** Loads the logical networks and follows them (again after a lost watch); starts the periodic full sync. */
  async start(): Promise<void> {
    await this.logical.start();
    if (this.timer === undefined && !this.stopped)
      this.timer = setInterval(() => this.schedule(), this.deps.fullSyncMs ?? FULL_SYNC_MS).unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.logical.stop();
    await this.settled;
  }

  /** A full sync soon (after this host's networks changed, an OVS restart); calls made while a sync runs make one more. */
  schedule(): void {
    this.full = true;
    this.kick();
  }

  /** The tunnels to these peers soon (their registration or membership changed); undefined: every peer's, a full sync. */
  peersChanged(peers: readonly string[] | undefined): void {
    if (peers === undefined) return this.schedule();
    for (const p of peers) this.peers.add(p);
    this.kick();
  }

  private kick(): void {
    if (this.stopped) return;
    if (this.running !== undefined) {
      this.again = true;
      return;
    }
    this.running = this.syncLoop();
    this.settled = this.running;
  }

  private async syncLoop(): Promise<void> {
    try {
      do {
        this.again = false;
        const [full, peers] = [this.full, this.peers];
        this.full = false;
        this.peers = new Set();
        await (full ? this.syncAll() : this.syncPeers(peers)).catch((err: unknown) => {
          this.full = true; // a step may have failed half done: the retry reads OVS again
          this.deps.log.warn({ err }, `cannot bring VXLAN tunnels in line: ${messageOf(err)}; retrying`);
          setTimeout(() => this.schedule(), 1000).unref();
        });
      } while (this.again && !this.stopped);
    } finally {
      // In the same tick as the last check of `again`: a change told after it starts a new loop
      // (cleared in a .finally() a microtask later, a change told in between was lost).
      this.running = undefined;
    }
  }

  /** Both registries loaded: before, no peer (or no member) known would take every tunnel down. */
  private ready(): boolean {
    return this.deps.hostsLoaded?.() !== false && this.logical.loaded;
  }

  private async syncAll(): Promise<void> {
    if (!this.ready()) return void (this.full = true); // their first load schedules one
    const self = this.deps.self();
    const wanted = wantedTunnels(self.name, await this.deps.networks(), this.logical.records, this.deps.hosts());
    const have = (await this.deps.ovs.ownPorts()).filter((p) => roleOf(p) === 'tunnel');
    const byName = new Map(wanted.map((w) => [w.name, w]));
    const added: string[] = [];
    const removed: string[] = [];
    const udp = this.udp();
    const haveNames = new Set(have.map((p) => p.name));
    const kept = new Set<string>();
    for (const port of have) {
      const w = byName.get(port.name);
      if (w !== undefined && remoteOf(port) === w.remoteIp && port.tag === w.tag && portOf(port) === udp) {
        kept.add(port.name);
        continue;
      }
      await this.deps.ovs.deletePort(port.name);
      removed.push(port.name);
      // Its successor at once (the same peer's address and VNI: a tag or address changed, or a
      // name of an earlier version's), so that peer's traffic pauses for one OVSDB round trip,
      // not for the whole sync.
      const next = byName.get(tunnelName(vniOf(port), remoteOf(port) ?? '') ?? '') ?? w;
      if (next === undefined || kept.has(next.name) || (next.name !== port.name && haveNames.has(next.name))) continue;
      await this.add(next, self.vtepIp);
      added.push(next.name);
      kept.add(next.name);
    }
    for (const w of wanted) {
      if (kept.has(w.name)) continue; // made, or wanted by a peer before (two peers at one address: one port)
      await this.add(w, self.vtepIp);
      added.push(w.name);
      kept.add(w.name);
    }
    this.applied.clear();
    this.owners.clear();
    const byPeer = new Map<string, Tunnel[]>();
    for (const w of wanted) byPeer.set(w.peer, [...(byPeer.get(w.peer) ?? []), w]);
    for (const [peer, tunnels] of byPeer) this.setApplied(peer, tunnels);
    this.count = byName.size;
    await this.changed(added, removed);
  }

  /** The tunnels to `peers` only, against those this host made (a full sync mends any drift). */
  private async syncPeers(peers: ReadonlySet<string>): Promise<void> {
    if (peers.size === 0) return;
    if (!this.ready()) return void (this.full = true);
    const self = this.deps.self();
    const [networks, logical, hosts] = [await this.deps.networks(), this.logical.records, this.deps.hosts()];
    const added: string[] = [];
    const removed: string[] = [];
    const plans = [...peers].map((peer) => ({ peer, want: wantedTunnelsTo(self.name, peer, networks, logical, hosts) }));
    // A port is named by its VNI and address: a peer registered at another's address shares the
    // other's port, which only a full sync (every peer's tunnels at once) may add or remove.
    if (this.shared(plans)) return this.syncAll();
    for (const { peer, want } of plans) {
      const have = this.applied.get(peer) ?? [];
      for (const h of have) {
        if (want.some((w) => sameTunnel(w, h))) continue;
        await this.deps.ovs.deletePort(h.name);
        removed.push(h.name);
      }
      for (const w of want) {
        if (have.some((h) => sameTunnel(w, h))) continue;
        await this.add(w, self.vtepIp);
        added.push(w.name);
      }
      this.setApplied(peer, want);
      this.count += want.length - have.length;
    }
    await this.changed(added, removed);
  }

  /** Whether a port these peers want or made is another peer's too (wanted in this sync, or made). */
  private shared(plans: readonly { readonly peer: string; readonly want: readonly Tunnel[] }[]): boolean {
    const wantedBy = new Map<string, string>();
    for (const { peer, want } of plans)
      for (const t of [...want, ...(this.applied.get(peer) ?? [])]) {
        const other = wantedBy.get(t.name) ?? peer;
        if (other !== peer || [...(this.owners.get(t.name) ?? [])].some((p) => p !== peer)) return true;
        wantedBy.set(t.name, peer);
      }
    return false;
  }

  /** `peer`'s tunnels as made now (none: forgotten), in applied and in owners. */
  private setApplied(peer: string, tunnels: readonly Tunnel[]): void {
    for (const t of this.applied.get(peer) ?? []) {
      const owners = this.owners.get(t.name);
      owners?.delete(peer);
      if (owners?.size === 0) this.owners.delete(t.name);
    }
    if (tunnels.length === 0) this.applied.delete(peer);
    else this.applied.set(peer, tunnels);
    for (const t of tunnels) this.owners.set(t.name, (this.owners.get(t.name) ?? new Set()).add(peer));
  }

  private udp(): number {
    return this.deps.vxlanPort ?? VXLAN_PORT;
  }

  private add(w: Tunnel, localIp: string): Promise<void> {
    const udp = this.udp();
    return this.deps.ovs.addPort(w.bridge, w.name, {
      tag: w.tag,
      type: 'vxlan',
      protected: true,
      options: {
        remote_ip: w.remoteIp,
        key: String(w.vni),
        ...(localIp === '' ? {} : { local_ip: localIp }),
        ...(udp === VXLAN_PORT ? {} : { dst_port: String(udp) }),
      },
      externalIds: tunnelIds(w.peer, w.remoteIp, w.vni, udp),
    });
  }

  /** What follows ports coming or going: the log line, the groups told, the datapath refreshed. */
  private async changed(added: readonly string[], removed: readonly string[]): Promise<void> {
    if (added.length + removed.length > 0) {
      this.deps.log.info({ added, removed, tunnels: this.count }, 'VXLAN tunnels changed');
      this.deps.onPortsChanged?.();
    }
    if (added.length > 0) this.addedUnsettled = true;
    if (this.addedUnsettled && this.deps.afterAdding !== undefined) {
      await this.deps.afterAdding();
      this.addedUnsettled = false;
    }
  }
}
