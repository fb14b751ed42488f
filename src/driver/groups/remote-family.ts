/**
 * The rest of a logical parent's family: its network and groups on the other hosts, and their
 * endpoints, as this host's groups' plan needs them (ovs/groups/group-remote.ts). Docker keeps a
 * network per host outside swarm, so a group of logical network `blue` is a network on each host
 * that has one: `-o ovsnet.group=db -o ovsnet.network=blue` on each, with that host's own
 * `-o ovsnet.allow`. Every host's records are in the shared store.
 *
 * remotePart() is pure. RemoteFamilies follows the records (with etcd): every network
 * record, and the endpoints of the networks of families that have a group somewhere, and calls
 * `onChange` (coalesced) when what a plan reads moved.
 */
import type { HostRecord } from '../../cluster/hosts.js';
import type { Logger } from '../../lib/log.js';
import type { FollowedRecords } from '../../store/follow.js';
import type { Store } from '../../store/types.js';
import type { GroupAllow } from '../model/group-options.js';
import { resolveAllows, type AllowRule } from '../model/group-options.js';
import { containsAddress, formatAddress, parseAddress, prefix } from '../../lib/cidr.js';
import type { EndpointRecord, NetworkRecord } from '../model/records.js';
import { followEndpoints, followNetworks } from '../records/driver-records.js';
import { routerMac, type RemoteMember, type RemotePart } from '../ovs/groups/group-remote.js';
import { tunnelName } from '../vxlan/tunnels.js';

/** A logical parent's networks on other hosts: the parent's there and its groups there. */
export function remoteNetworks(self: string, logical: string, networks: Iterable<NetworkRecord>): NetworkRecord[] {
  const all = [...networks];
  const parents = all.filter((n) => n.host !== undefined && n.host !== self && n.logical === logical && n.vni !== undefined);
  const ids = new Set(parents.map((n) => n.networkId));
  return [...parents, ...all.filter((n) => n.group !== undefined && ids.has(n.group.parent))];
}

export interface RemoteInputs {
  readonly self: string;
  /** This host's network of the logical parent (its `logical` and `vni` set). */
  readonly parent: NetworkRecord;
  /** Every host's network records. */
  readonly networks: Iterable<NetworkRecord>;
  readonly endpointsOf: (networkId: string) => readonly EndpointRecord[];
  /** This host's groups of the parent (the parent's own name included) by name: their tags. */
  readonly localTags: ReadonlyMap<string, number>;
  /** The bridge's OpenFlow ports by name (the tunnels'). */
  readonly ofports: ReadonlyMap<string, number>;
  /** A registered host's tunnel address (its tunnel port's name holds it). */
  readonly vtepOf: (host: string) => string | undefined;
}

const plain = (cidr: string | undefined) => cidr?.split('/')[0];
const MAC = /^[0-9a-f][02468ace](:[0-9a-f]{2}){5}$/;
const NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * `address` (plain) when it is one of `subnets`' (CIDRs) in canonical form; another host's
 * record goes into flows, so nothing else is taken from it.
 */
function inside(address: string | undefined, subnets: readonly string[]): string | undefined {
  if (address === undefined) return undefined;
  try {
    const a = parseAddress(address);
    if (formatAddress(a.family, a.value) !== address) return undefined;
    return subnets.some((s) => containsAddress(prefix(s), a.family, a.value)) ? address : undefined;
  } catch {
    return undefined;
  }
}

/** A network's allow rules when every one is well formed (another host's record); none otherwise. */
function wellFormed(rules: readonly AllowRule[]): readonly AllowRule[] {
  const ok = (r: AllowRule) =>
    typeof r.group === 'string' &&
    NAME.test(r.group) &&
    (r.port === undefined ||
      ((r.port.proto === 'tcp' || r.port.proto === 'udp') &&
        Number.isInteger(r.port.number) &&
        r.port.number >= 1 &&
        r.port.number <= 65535));
  const listed: unknown = rules;
  return Array.isArray(listed) && rules.every(ok) ? rules : [];
}

/** What the parent's family on other hosts adds to this host's plan. Pure. */
export function remotePart(i: RemoteInputs): RemotePart {
  const { parent } = i;
  const logical = parent.logical;
  if (logical === undefined || parent.vni === undefined) return { plan: undefined, groups: false, skipped: [] };
  const vni = parent.vni;
  const networks = remoteNetworks(i.self, logical, i.networks);
  if (networks.length === 0) return { plan: undefined, groups: false, skipped: [] };
  const members: RemoteMember[] = [];
  const allows: GroupAllow[] = [];
  const skipped: string[] = [];
  const numbers = new Map<string, number>();
  const groups = new Map<number, { name: string; host: string }>();
  const six = parent.ipv6.some((d) => d.gateway !== undefined);
  const subnets4 = parent.ipv4.map((d) => d.pool);
  const subnets6 = parent.ipv6.map((d) => d.pool);
  for (const n of [...networks].sort((a, b) => (a.host ?? '').localeCompare(b.host ?? '') || a.networkId.localeCompare(b.networkId))) {
    const host = n.host ?? '';
    const name = n.group?.name ?? logical;
    if (!NAME.test(name)) continue;
    const key = `${host}\u0000${name}`;
    let group = numbers.get(key);
    if (group === undefined) {
      group = numbers.size + 1;
      numbers.set(key, group);
      groups.set(group, { name, host });
      const own = i.localTags.get(name);
      if (own !== undefined) allows.push({ from: own, to: group });
      allows.push(...resolveAllows(group, wellFormed(n.group?.allow ?? n.allow ?? []), i.localTags).allows);
    }
    const port = tunnelName(vni, i.vtepOf(host) ?? '');
    const tunnel = port === undefined ? undefined : i.ofports.get(port);
    for (const ep of i.endpointsOf(n.networkId)) {
      const address = inside(plain(ep.address), subnets4);
      const address6 = six ? inside(plain(ep.addressV6), subnets6) : undefined;
      const mac = typeof ep.mac === 'string' ? ep.mac.toLowerCase() : '';
      if (tunnel === undefined || (address === undefined && address6 === undefined) || !MAC.test(mac)) {
        skipped.push(`${host}/${ep.endpointId.slice(0, 12)}`);
        continue;
      }
      members.push({
        ...(address === undefined ? {} : { address }),
        ...(address6 === undefined ? {} : { address6 }),
        mac,
        group,
        tunnel,
      });
    }
  }
  return {
    plan: { vni, routerMac: routerMac(vni), members, allows, groups },
    groups: networks.some((n) => n.group !== undefined),
    skipped,
  };
}

export interface RemoteFamiliesDeps {
  readonly store: Store;
  readonly log: Logger;
  readonly self: string;
  /** The host registry (tunnel ports are named by the peer's address). */
  readonly hosts: () => ReadonlyMap<string, HostRecord>;
  /** Something a plan reads changed: resync the bridge (called at most every 50 ms). */
  readonly onChange: () => void;
}

/** Follows every host's network records and the endpoints of the families with groups. */
export class RemoteFamilies {
  private readonly networks: FollowedRecords<NetworkRecord>;
  private readonly endpoints = new Map<string, FollowedRecords<EndpointRecord>>();
  /** Moves each time any host's network records change (group-wiring.ts's memo of families without groups). */
  generation = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly deps: RemoteFamiliesDeps) {
    this.networks = followNetworks(deps.store, deps.log, () => {
      this.generation++;
      this.changed(true);
    });
  }

  start(): Promise<void> {
    return this.networks.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    await this.networks.stop();
    await Promise.all([...this.endpoints.values()].map((f) => f.stop()));
    this.endpoints.clear();
  }

  /** The part of `parent`'s plan the other hosts make (see remotePart). */
  part(parent: NetworkRecord, localTags: ReadonlyMap<string, number>, ofports: ReadonlyMap<string, number>): RemotePart {
    return remotePart({
      self: this.deps.self,
      parent,
      networks: this.networks.records.values(),
      endpointsOf: (id) => [...(this.endpoints.get(id)?.records.values() ?? [])],
      localTags,
      ofports,
      vtepOf: (host) => this.deps.hosts().get(host)?.vtepIp,
    });
  }

  /** Tunnel ports came or went: plans with members on other hosts are made again. */
  tunnelsChanged(): void {
    if (this.endpoints.size > 0) this.changed(false);
  }

  /** The networks whose endpoints are followed: those of families with a group on some host. */
  private wanted(): Set<string> {
    const all = [...this.networks.records.values()];
    const wanted = new Set<string>();
    for (const logical of new Set(all.filter((n) => n.logical !== undefined && n.vni !== undefined).map((n) => n.logical ?? ''))) {
      const family = remoteNetworks('', logical, all);
      if (!family.some((n) => n.group !== undefined)) continue;
      for (const n of family) if (n.host !== this.deps.self) wanted.add(n.networkId);
    }
    return wanted;
  }

  private changed(networks: boolean): void {
    if (this.stopped) return;
    if (networks) {
      const wanted = this.wanted();
      for (const [id, f] of this.endpoints) {
        if (wanted.has(id)) continue;
        this.endpoints.delete(id);
        void f.stop();
      }
      for (const id of wanted) {
        if (this.endpoints.has(id)) continue;
        const f = followEndpoints(this.deps.store, this.deps.log, id, () => this.changed(false));
        this.endpoints.set(id, f);
        f.start().catch((err: unknown) => {
          this.deps.log.warn({ err, network: id }, 'cannot follow the endpoints of a network of a group family; retrying in 1 s');
          this.endpoints.delete(id);
          void f.stop();
          setTimeout(() => this.changed(true), 1000).unref();
        });
      }
    }
    if (this.timer !== undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.deps.onChange();
    }, 50);
    this.timer.unref();
  }
}
