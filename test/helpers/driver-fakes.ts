/**
 * In-memory OVS, links, NAT and OpenFlow for driver unit tests. They error on misuse, as the
 * real ones do: adding a port that exists or to a missing bridge, creating a link that exists,
 * addressing a link that does not, syncing flows on a missing bridge or outside ovsnet's
 * cookies. `failNext` makes the next call of a method fail.
 */
import { LinkError } from '../../src/driver/links/link-error.js';
import { OvsnetError } from '../../src/lib/errors.js';
import type { FlowsApi, HostPortsApi, LinksApi, NatApi, OpenFlowApi, OvsApi } from '../../src/driver/effects/deps.js';
import type { PortBinding } from '../../src/driver/model/records.js';
import { inScope, type CookieScope } from '../../src/driver/ovs/cookies.js';
import { OWNER } from '../../src/driver/ovs/external-ids.js';
import { noGroupMods, type FlowMods, type MeterMods } from '../../src/driver/ovs/flow-diff.js';
import { changeCount, type Changes, type Wanted } from '../../src/driver/ovs/flow-sync.js';
import type { DatapathType, FailMode, OwnPort } from '../../src/driver/ovs/ovsdb.js';
import { meterPort } from '../../src/driver/ovs/qos-flows.js';
import type { VethSpec } from '../../src/driver/links/links.js';
import type { SpareNames } from '../../src/driver/links/spare-ops.js';
import type { GuardSegment } from '../../src/driver/ovs/flows.js';

class Failer {
  private readonly pending = new Set<string>();
  failNext(method: string): void {
    this.pending.add(method);
  }
  protected check(method: string): void {
    if (this.pending.delete(method)) throw new OvsnetError('OVS_FAILED', `injected failure of ${method}`);
  }
}

export class FakeOvs extends Failer implements OvsApi {
  /** Datapath type by bridge. */
  readonly bridges = new Map<string, string>();
  /** fail_mode by bridge, as ensureBridge or setFailMode left it ('' : unset, OVS's standalone). */
  readonly failModes = new Map<string, FailMode | ''>();
  /** Open_vSwitch other_config:flow-restore-wait. */
  restoreWait = false;
  /** Every setFlowRestoreWait, in order. */
  readonly restoreWaitSets: boolean[] = [];
  /** The bridge's OpenFlow tables: ovs-vswitchd flushes them when a bridge's fail mode changes. */
  openflow: FakeOpenFlow | undefined;
  readonly ports = new Map<
    string,
    {
      bridge: string;
      tag: number;
      type: string;
      externalIds: Record<string, string>;
      options?: Record<string, string>;
      protected?: boolean;
    }
  >();
  links: FakeLinks | undefined;

  async bridgeExists(bridge: string): Promise<boolean> {
    return this.bridges.has(bridge);
  }
  /** As the real one: an existing bridge is left as it is, fail mode included. */
  async ensureBridge(bridge: string, datapath: DatapathType, failMode: FailMode): Promise<void> {
    this.check('ensureBridge');
    if (this.bridges.has(bridge)) return;
    this.bridges.set(bridge, datapath);
    this.failModes.set(bridge, failMode);
  }
  async failMode(bridge: string): Promise<string | undefined> {
    return this.bridges.has(bridge) ? (this.failModes.get(bridge) ?? '') : undefined;
  }
  async setFailMode(bridge: string, failMode: FailMode): Promise<void> {
    this.check('setFailMode');
    if (!this.bridges.has(bridge)) throw new OvsnetError('OVS_FAILED', `no bridge ${bridge}`);
    if ((this.failModes.get(bridge) ?? '') !== failMode) this.openflow?.flush(bridge);
    this.failModes.set(bridge, failMode);
  }
  async flowRestoreWait(): Promise<boolean> {
    this.check('flowRestoreWait');
    return this.restoreWait;
  }
  async setFlowRestoreWait(on: boolean): Promise<void> {
    this.check('setFlowRestoreWait');
    this.restoreWaitSets.push(on);
    this.restoreWait = on;
  }
  async addPort(
    bridge: string,
    name: string,
    opts: {
      tag: number;
      type?: string;
      externalIds: Record<string, string>;
      mtu?: number;
      options?: Record<string, string>;
      protected?: boolean;
      replace?: boolean;
    },
  ): Promise<void> {
    this.check('addPort');
    if (opts.replace === true) await this.deletePort(name);
    if (opts.mtu !== undefined) this.mtus.set(name, opts.mtu);
    if (!this.bridges.has(bridge)) throw new OvsnetError('OVS_FAILED', `no bridge ${bridge}`);
    if (this.ports.has(name)) throw new OvsnetError('OVS_FAILED', `port ${name} exists`);
    this.ports.set(name, {
      bridge,
      tag: opts.tag,
      type: opts.type ?? '',
      externalIds: { ...OWNER, ...opts.externalIds },
      ...(opts.options === undefined ? {} : { options: opts.options }),
      ...(opts.protected === undefined ? {} : { protected: opts.protected }),
    });
    if (opts.type === 'internal') this.links?.names.add(name);
  }
  async deletePort(name: string, marks?: Readonly<Record<string, string>>): Promise<boolean> {
    this.check('deletePort');
    const p = this.ports.get(name);
    if (p !== undefined && marks !== undefined && Object.entries(marks).some(([k, v]) => p.externalIds[k] !== v)) return false;
    this.ports.delete(name);
    // As ovs-vswitchd does: the internal device goes once it applies the change (waitApplied).
    if (p?.type === 'internal') this.unapplied.add(name);
    return p !== undefined;
  }
  /** Internal devices whose port is deleted but which ovs-vswitchd has not removed yet. */
  readonly unapplied = new Set<string>();
  async ownPorts(): Promise<OwnPort[]> {
    return [...this.ports].map(([name, p]) => ({ name, uuid: name, tag: p.tag, externalIds: p.externalIds }));
  }
  readonly mtus = new Map<string, number>();
  async setMtu(name: string, mtu: number): Promise<void> {
    if (!this.ports.has(name)) throw new OvsnetError('OVS_FAILED', `no interface ${name}`);
    this.mtus.set(name, mtu);
  }
  async waitApplied(): Promise<void> {
    this.check('waitApplied');
    for (const name of this.unapplied) if (!this.ports.has(name)) this.links?.names.delete(name);
    this.unapplied.clear();
  }
}

export class FakeLinks extends Failer implements LinksApi {
  readonly names = new Set<string>();
  readonly peers = new Map<string, string>();
  readonly addresses = new Map<string, string[]>();
  readonly txOff = new Set<string>();
  /** Aliases by link name (links without one have none here). */
  readonly aliases = new Map<string, string>();

  /** As the real one: a name held is EEXIST, unless `replace` finds the endpoint's own leftover (only then looked up). */
  async createVeth(spec: VethSpec): Promise<void> {
    this.check('createVeth');
    const exists = () => new LinkError(`create veth ${spec.host}/${spec.container}`, 'Request rejected: EEXIST');
    if (this.names.has(spec.host) || this.names.has(spec.container)) {
      if (spec.replace !== true || (spec.alias !== undefined && (await this.alias(spec.host)) !== spec.alias)) throw exists();
      await this.deleteLink(spec.host);
      if (this.names.has(spec.host) || this.names.has(spec.container)) throw exists();
    }
    this.names.add(spec.host);
    this.names.add(spec.container);
    this.peers.set(spec.host, spec.container);
    if (spec.alias !== undefined) this.aliases.set(spec.host, spec.alias);
    if (spec.txChecksumOff === true) this.txOff.add(spec.container);
  }
  /** As the real one: false when the two are not a pair; renames both, the host end carrying `alias`. */
  async parkVeth(host: string, container: string, spare: SpareNames, alias: string): Promise<boolean> {
    this.check('parkVeth');
    if (this.peers.get(host) !== container || !this.names.has(container)) return false;
    this.rename(host, container, spare.host, spare.container);
    this.aliases.set(spare.host, alias);
    return true;
  }
  /** As the real one: a failure (or a spare that is no pair) leaves neither pair. */
  async adoptVeth(spare: SpareNames, spec: VethSpec): Promise<void> {
    if (spec.replace === true && (spec.alias === undefined || this.aliases.get(spec.host) === spec.alias)) await this.deleteLink(spec.host);
    try {
      this.check('adoptVeth');
      if (this.peers.get(spare.host) !== spare.container) throw new OvsnetError('LINK_FAILED', `${spare.host} is no veth pair`);
      if (this.names.has(spec.host) || this.names.has(spec.container))
        throw new LinkError(`rename ${spare.host}`, 'Request rejected: EEXIST');
    } catch (err) {
      await this.deleteLink(spare.host);
      throw err;
    }
    this.rename(spare.host, spare.container, spec.host, spec.container);
    if (spec.alias !== undefined) this.aliases.set(spec.host, spec.alias);
    if (spec.txChecksumOff === true) this.txOff.add(spec.container);
    this.adopted.push(spec.host);
  }
  /** Host ends Join got from a spare (adoptVeth), in order. */
  readonly adopted: string[] = [];
  private rename(host: string, container: string, newHost: string, newContainer: string): void {
    for (const n of [host, container]) this.names.delete(n);
    this.names.add(newHost);
    this.names.add(newContainer);
    this.peers.delete(host);
    this.peers.set(newHost, newContainer);
    this.aliases.delete(host);
    if (this.txOff.delete(container)) this.txOff.add(newContainer);
  }
  async deleteLink(name: string): Promise<void> {
    this.names.delete(name);
    this.aliases.delete(name);
    const peer = this.peers.get(name);
    if (peer !== undefined) this.names.delete(peer);
    this.peers.delete(name);
  }
  async exists(name: string): Promise<boolean> {
    return this.names.has(name);
  }
  /** Link lookups made (alias), as the worker's RTM_GETLINK round trips. */
  lookups = 0;
  async alias(name: string): Promise<string | undefined> {
    this.lookups++;
    return this.names.has(name) ? (this.aliases.get(name) ?? '') : undefined;
  }
  async aliased(prefix: string): Promise<{ name: string; alias: string }[]> {
    return [...this.aliases].filter(([, a]) => a.startsWith(prefix)).map(([name, alias]) => ({ name, alias }));
  }
  async configureAddress(name: string, family: 4 | 6, address: Buffer, bits: number): Promise<void> {
    this.check('configureAddress');
    if (!this.names.has(name)) throw new OvsnetError('LINK_FAILED', `link ${name} does not exist`);
    const list = this.addresses.get(name) ?? [];
    const text = family === 4 ? [...address].join('.') : address.toString('hex');
    if (!list.includes(`${text}/${bits}`)) list.push(`${text}/${bits}`);
    this.addresses.set(name, list);
  }
}

export class FakeNat extends Failer implements NatApi {
  /** Masqueraded IPv4 networks: "subnet via gateway port" by network ID. */
  readonly networks = new Map<string, string>();
  readonly ports = new Map<string, string>();

  /** Every subnet with forwarding rules, IPv4 and IPv6. */
  readonly subnets = new Set<string>();

  /** Masqueraded IPv6 networks (NAT66), the same way. */
  readonly networksV6 = new Map<string, string>();

  /** Subnets whose containers are kept apart at the gateway (enable_icc=false). */
  readonly noIcc = new Set<string>();

  async addNetwork(networkId: string, subnet: string, gatewayPort: string, masquerade = true, icc = true): Promise<void> {
    this.check('addNetwork');
    if (!icc) this.noIcc.add(subnet);
    if (masquerade) (subnet.includes(':') ? this.networksV6 : this.networks).set(networkId, `${subnet} via ${gatewayPort}`);
    this.subnets.add(subnet);
  }
  async removeNetwork(networkId: string, subnet: string): Promise<void> {
    (subnet.includes(':') ? this.networksV6 : this.networks).delete(networkId);
    this.subnets.delete(subnet);
    this.noIcc.delete(subnet);
  }
  /** As the real one: replaces the endpoint's rules of `address`'s family (IPv4 first when both). */
  async addPorts(endpointId: string, address: string, ports: readonly { hostPort: number; containerPort: number }[]): Promise<void> {
    this.check('addPorts');
    const v6 = address.includes(':');
    const others = (this.ports.get(endpointId)?.split(',') ?? []).filter((r) => r !== '' && r.includes('[') !== v6);
    const mine = ports.map((p) => `${p.hostPort}->${v6 ? `[${address}]` : address}:${p.containerPort}`);
    this.ports.set(endpointId, (v6 ? [...others, ...mine] : [...mine, ...others]).join(','));
  }
  async removePorts(endpointId: string): Promise<void> {
    this.ports.delete(endpointId);
  }
  async prunePorts(keep: ReadonlySet<string>): Promise<string[]> {
    const stale = [...this.ports.keys()].filter((id) => !keep.has(id.slice(0, 12)));
    for (const id of stale) this.ports.delete(id);
    return stale.map((id) => id.slice(0, 12));
  }
}

/**
 * Host ports as the real HostPorts holds them, without sockets: `hostTaken` plays ports that
 * host processes hold; a claimed port is held until released; HostPort 0 picks from 49153.
 */
export class FakeHostPorts extends Failer implements HostPortsApi {
  readonly held = new Map<string, PortBinding[]>();
  readonly hostTaken = new Set<number>();

  async claim(
    target: { endpointId: string; address?: string; addressV6?: string },
    wanted: readonly PortBinding[],
  ): Promise<PortBinding[]> {
    this.check('claim');
    const mine = this.held.get(target.endpointId);
    if (mine !== undefined) return mine;
    for (const b of wanted) {
      const to = b.hostIp.includes(':') ? target.addressV6 : target.address;
      if (to === undefined || to === '') throw new OvsnetError('PORT_UNSUPPORTED', `no address of ${b.hostIp || '0.0.0.0'}'s family`);
    }
    const busy = new Set([...this.hostTaken, ...[...this.held.values()].flat().map((b) => b.hostPort)]);
    const out = wanted.map((b) => {
      const [lo, hi] = b.hostPort === 0 ? [49153, 60999] : [b.hostPort, b.hostPortEnd];
      for (let p = lo; p <= hi; p++) {
        if (busy.has(p)) continue;
        busy.add(p);
        return { ...b, hostPort: p, hostPortEnd: p };
      }
      throw new OvsnetError('PORT_IN_USE', `host ${b.proto} port ${lo}-${hi} is in use`);
    });
    this.held.set(target.endpointId, out);
    return out;
  }
  async release(endpointId: string): Promise<void> {
    this.held.delete(endpointId);
  }
}

export class FakeFlows extends Failer implements FlowsApi {
  /** Guarded gateways by bridge and VNI. */
  readonly guards = new Map<string, readonly string[]>();

  async guardGateway(bridge: string, segment: GuardSegment, gateways: readonly string[]): Promise<void> {
    this.check('guardGateway');
    this.guards.set(segmentKey(bridge, segment), gateways);
  }
  async unguardGateway(bridge: string, segment: GuardSegment): Promise<void> {
    this.guards.delete(segmentKey(bridge, segment));
  }
}

/** A flow's cookie, from its `cookie=0x...` prefix (0 without one, as OVS reads it). */
export function cookieOfFlow(flow: string): bigint {
  const hex = /^cookie=(0x[0-9a-f]+)(?:,|$)/i.exec(flow)?.[1];
  return hex === undefined ? 0n : BigInt(hex);
}

/** What identifies a flow on the switch (its table, priority and match): the flow without cookie and actions. */
const matchOf = (flow: string): string =>
  flow
    .replace(/^cookie=0x[0-9a-f]+,?/i, '')
    .replace(/,?actions=.*$/, '')
    .trim();

/**
 * The bridge's OpenFlow state as ovs-vswitchd keeps it: flows as add-flow strings in a set per
 * bridge, meters (ID -> add-meter spec) per bridge. diff/sync compare within the scope by set
 * difference (a flow whose match stays and whose actions change counts as modified, as an
 * `add` replaces it); flows outside the scope are never touched. `restart()` plays ovs-vswitchd
 * restarting (it keeps neither flows nor meters). Errors as the real one: no such bridge (when
 * it knows the FakeOvs), a wanted flow outside the scope.
 */
export class FakeOpenFlow extends Failer implements OpenFlowApi {
  readonly flows = new Map<string, Set<string>>();
  readonly meters = new Map<string, Map<number, string>>();
  /** OpenFlow modifications made so far (flow mods and meter commands). */
  modifications = 0;
  /** sync() calls. */
  syncs = 0;
  /** sync() calls that changed something (one bundle each, on the real switch). */
  writes = 0;
  /** The bridges, to refuse a missing one as ovs-ofctl does. */
  ovs: FakeOvs | undefined;

  /** The bridge's flows (in `scope`, if given). */
  flowsOf(bridge: string, scope?: CookieScope): string[] {
    return [...(this.flows.get(bridge) ?? [])].filter((f) => scope === undefined || inScope(cookieOfFlow(f), scope));
  }
  metersOf(bridge: string): Map<number, string> {
    return new Map(this.meters.get(bridge) ?? []);
  }
  /** Puts flows (another controller's, or a leftover) on the bridge, as add-flow would. */
  add(bridge: string, ...flows: string[]): void {
    const set = this.flows.get(bridge) ?? new Set<string>();
    for (const f of flows) {
      for (const other of set) if (matchOf(other) === matchOf(f)) set.delete(other);
      set.add(f);
    }
    this.flows.set(bridge, set);
  }
  /** The bridge's flows gone (a fail-mode change). */
  flush(bridge: string): void {
    this.flows.delete(bridge);
  }
  /** ovs-vswitchd restarted: every bridge's flows and meters gone. */
  restart(): void {
    this.flows.clear();
    this.meters.clear();
  }

  async diff(bridge: string, scope: CookieScope, wanted: Wanted): Promise<Changes> {
    this.check('diff');
    return this.changes(bridge, scope, wanted);
  }

  async sync(bridge: string, scope: CookieScope, wanted: Wanted): Promise<Changes> {
    this.check('sync');
    const changes = this.changes(bridge, scope, wanted);
    this.syncs += 1;
    if (changeCount(changes) === 0) return changes;
    this.writes += 1;
    this.modifications += changeCount(changes);
    const want = new Set(wanted.flows);
    const set = new Set([...(this.flows.get(bridge) ?? [])].filter((f) => !inScope(cookieOfFlow(f), scope) || want.has(f)));
    for (const f of want) set.add(f);
    this.flows.set(bridge, set);
    const meters = this.meters.get(bridge) ?? new Map<number, string>();
    for (const id of [...changes.meters.add, ...changes.meters.modify]) meters.set(id, wanted.meters?.get(id) ?? '');
    for (const id of changes.meters.remove) meters.delete(id);
    this.meters.set(bridge, meters);
    return changes;
  }

  private changes(bridge: string, scope: CookieScope, wanted: Wanted): Changes {
    if (this.ovs !== undefined && !this.ovs.bridges.has(bridge))
      throw new OvsnetError('OVS_FAILED', `${bridge} is not a bridge or a socket`);
    for (const f of wanted.flows)
      if (!inScope(cookieOfFlow(f), scope)) throw new Error(`a wanted flow lies outside ovsnet's cookie scope: ${f}`);
    const have = this.flowsOf(bridge, scope);
    const want = new Set(wanted.flows);
    const gone = have.filter((f) => !want.has(f));
    const fresh = [...want].filter((f) => !have.includes(f));
    const goneMatches = new Set(gone.map(matchOf));
    const freshMatches = new Set(fresh.map(matchOf));
    const modified = fresh.filter((f) => goneMatches.has(matchOf(f))).length;
    const deleted = gone.filter((f) => !freshMatches.has(matchOf(f)));
    const flows: FlowMods = {
      lines: [...fresh.map((f) => `add ${f}`), ...deleted.map((f) => `delete_strict ${matchOf(f)}`)],
      added: fresh.length - modified,
      modified,
      deleted: deleted.length,
    };
    return { flows, meters: this.meterChanges(bridge, wanted.meters), groups: noGroupMods };
  }

  /** ovsnet's meters only (its ID range), and only when the caller says which it wants. */
  private meterChanges(bridge: string, want: ReadonlyMap<number, string> | undefined): MeterMods {
    if (want === undefined) return { add: [], modify: [], remove: [] };
    const have = this.meters.get(bridge) ?? new Map<number, string>();
    return {
      add: [...want.keys()].filter((id) => !have.has(id)),
      modify: [...want].filter(([id, spec]) => have.has(id) && have.get(id) !== spec).map(([id]) => id),
      remove: [...have.keys()].filter((id) => meterPort(id) !== undefined && !want.has(id)),
    };
  }
}

/** An OpenFlow fake for `ovs`'s bridges, linked so that a fail-mode change flushes flows. Add it as `openflow` to DriverDeps. */
export function fakeOpenFlow(ovs: FakeOvs): FakeOpenFlow {
  const openflow = new FakeOpenFlow();
  openflow.ovs = ovs;
  ovs.openflow = openflow;
  return openflow;
}

/** 'br0/42' for VNI 42, 'br0/vlan7@eth1' for VLAN 7 on uplink eth1. */
function segmentKey(bridge: string, s: GuardSegment): string {
  return 'vni' in s ? `${bridge}/${s.vni}` : `${bridge}/vlan${s.vlan}@${s.uplink}`;
}

/** One fake of each side effect, OVS's internal ports appearing as links as the real ones do. */
export function fakeSideEffects(): { ovs: FakeOvs; links: FakeLinks; nat: FakeNat; flows: FakeFlows; hostPorts: FakeHostPorts } {
  const ovs = new FakeOvs();
  const links = new FakeLinks();
  ovs.links = links;
  return { ovs, links, nat: new FakeNat(), flows: new FakeFlows(), hostPorts: new FakeHostPorts() };
}
