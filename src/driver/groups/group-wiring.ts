/**
 * Endpoint groups in the driver. A group (-o ovsnet.group=NAME
 * -o ovsnet.network=PARENT) is a network of its own tag on this host sharing its parent's
 * subnet, pool (ipam-driver/pools/group-pool.ts) and gateway: Join gives its containers the parent's
 * gateway, and the parent's OpenFlow plan (group-plan.ts -> ovs/groups/group-flows.ts) follows the
 * records: after a group or an endpoint of the family comes or goes, at reconcile, and from the
 * periodic check once ovs-vswitchd lost it. A parent without groups has no such flows at all.
 */
import { messageOf, OvsnetError } from '../../lib/errors.js';
import type { DriverDeps } from '../effects/deps.js';
import type { NetworkOptions } from '../model/options.js';
import type { DriverRecords } from '../records/driver-records.js';
import { logicalExists } from '../records/logical-records.js';
import { parentName, type IpData, type NetworkRecord } from '../model/records.js';
import type { CreateNetworkRequest } from '../model/requests.js';
import { planGroups, type GroupNetwork } from './group-plan.js';
import type { GroupPlan } from '../ovs/groups/group-flows.js';

export type GroupWiringDeps = Pick<DriverDeps, 'groups' | 'qos' | 'log' | 'ovs' | 'store' | 'remoteGroups'>;
type Records = Pick<DriverRecords, 'localNetworks' | 'endpointsOf' | 'network'>;

/** The parent of a network's family: a group's parent, a named network itself; undefined for others. */
function familyParent(n: NetworkRecord): string | undefined {
  return n.group?.parent ?? (parentName(n) === undefined ? undefined : n.networkId);
}

export class GroupWiring {
  /**
   * Families found without groups on any host, with the network records' state they were found
   * in (this host's changes, RemoteFamilies' generation): an endpoint coming or going in such a
   * family has no rules to refresh, and its Join and DeleteEndpoint read no network record.
   */
  private readonly groupless = new Map<string, string>();
  private localChanges = 0;

  constructor(
    private readonly deps: GroupWiringDeps,
    private readonly records: Records,
  ) {}

  /**
   * CreateNetwork's checks of a group against its parent on this host, before anything is made:
   * returns the options with the parent's NetworkID in place of its name (unchanged for a network
   * that is no group). Throws with what to give instead.
   */
  async resolve(req: CreateNetworkRequest, opts: NetworkOptions): Promise<NetworkOptions> {
    this.localChanges++; // a network is being made: families are looked at afresh
    const named = opts.groupsName;
    // The likely slip: a host's network meant to join a logical network, its -o ovsnet.encap forgotten.
    if (named !== undefined && (await logicalExists(this.deps.store, named))) {
      throw new OvsnetError(
        'NETWORK_OPTION_INVALID',
        `-o ovsnet.network=${named} without -o ovsnet.encap names a network of this host only, and hosts sharing this store have a logical network ${named}: add its -o ovsnet.encap (vxlan or vlan) to join it, or choose another name`,
      );
    }
    const g = opts.group;
    if (g === undefined) return opts;
    const refuse = (why: string) => new OvsnetError('NETWORK_OPTION_INVALID', `-o ovsnet.group=${g.name}: ${why}`);
    if (this.deps.groups === undefined || this.deps.qos === undefined) {
      throw refuse('this ovsnet was built without OpenFlow access, which endpoint groups need');
    }
    if (opts.internal) throw refuse("a group's containers leave through its parent's gateway: drop --internal");
    if (opts.infra) throw refuse('give -o ovsnet.infra=true to the parent, whose gateway and pool the group shares');
    const networks = await this.records.localNetworks();
    const parent = networks.find((n) => parentName(n) === g.parent);
    if (parent === undefined && networks.some((n) => n.logical === g.parent)) {
      throw refuse(
        `logical network ${g.parent} is a VLAN over the uplink (-o ovsnet.encap=vlan), and endpoint groups need their parent on this host or over VXLAN (-o ovsnet.encap=vxlan)`,
      );
    }
    if (parent === undefined) {
      throw new OvsnetError(
        'NETWORK_NOT_FOUND',
        `-o ovsnet.network=${g.parent}: no network on this host has that name; create the parent first (docker network create -d ovsnet --ipam-driver ovsnet --subnet SUBNET -o ovsnet.network=${g.parent} NAME), then its groups`,
      );
    }
    if (parent.icc === false) {
      throw refuse(
        `its parent ${g.parent} has -o com.docker.network.bridge.enable_icc=false, whose containers reach only the gateway, and a group's traffic is ruled by -o ovsnet.allow: give the groups a parent without it`,
      );
    }
    const gw = parent.ipv4.find((d) => d.gateway !== undefined);
    if (parent.gatewayPort === undefined || gw === undefined) {
      throw refuse(`its parent ${g.parent} has no gateway (--internal, or no IPv4 subnet), and groups reach each other through it`);
    }
    const mine = req.ipv4.map((d: IpData) => d.pool);
    // No gateway at all when Engine 28+ asked GwAllocCheck first (needsNoGateway): the parent's serves.
    const given = req.ipv4[0]?.gateway;
    if (mine.length !== 1 || mine[0] !== gw.pool || (given !== undefined && given !== gw.gateway)) {
      throw refuse(
        `a group shares its parent's subnet and gateway: give --subnet ${gw.pool} --ipam-driver ovsnet --ipam-opt ovsnet.group=${g.name} (this request has ${req.ipv4.map((d) => `${d.pool} gateway ${d.gateway ?? 'none'}`).join(', ') || 'no IPv4 subnet'})`,
      );
    }
    const gw6 = parent.ipv6.find((d) => d.gateway !== undefined);
    const mine6 = req.ipv6.map((d: IpData) => `${d.pool} gateway ${d.gateway ?? 'none'}`);
    if (mine6.length > 0 && (gw6 === undefined || mine6.length !== 1 || mine6[0] !== `${gw6.pool} gateway ${gw6.gateway ?? 'none'}`)) {
      throw refuse(
        gw6 === undefined
          ? `its parent ${g.parent} has no IPv6 subnet: create the group without --ipv6, or its parent with one`
          : `a group shares its parent's IPv6 subnet and gateway too: give --ipv6 --subnet ${gw6.pool} (this request has ${mine6.join(', ')})`,
      );
    }
    if (networks.some((n) => n.group?.parent === parent.networkId && n.group.name === g.name)) {
      throw new OvsnetError(
        'NETWORK_GROUP_EXISTS',
        `-o ovsnet.group=${g.name}: ${g.parent} has a group of that name already; choose another name`,
      );
    }
    return { ...opts, group: { ...g, parent: parent.networkId } };
  }

  /**
   * Brings the flows of the family of `parentId` in line with the records: none without groups
   * (removed, unless `endpointOnly`: an endpoint came or went, so the groups did not change).
   * Returns the parent's record as read (undefined when gone, or without OpenFlow access).
   */
  async refresh(parentId: string, endpointOnly = false): Promise<NetworkRecord | undefined> {
    const { groups: api, qos } = this.deps;
    if (api === undefined || qos === undefined) return undefined;
    if (!endpointOnly) this.localChanges++;
    else if (this.groupless.get(parentId) === this.state()) return this.records.network(parentId);
    const seen = this.state();
    const networks = await this.records.localNetworks();
    const parent = networks.find((n) => n.networkId === parentId);
    if (parent === undefined) return undefined;
    const grouped = this.hasGroups(parent, networks);
    if (grouped) this.groupless.delete(parentId);
    else if (seen === this.state()) this.groupless.set(parentId, seen);
    if (!grouped && endpointOnly) return parent;
    await this.deps.ovs.waitApplied(); // a port just added has its OpenFlow number once applied
    const plan = await this.plan(parent, networks);
    if (plan === undefined) await api.remove(parent.bridge, parent.tag);
    else await api.apply(parent.bridge, plan);
    return parent;
  }

  /** The network records' state the memo of families without groups is valid for. */
  private state(): string {
    return `${this.localChanges}/${this.deps.remoteGroups?.generation ?? 0}`;
  }

  /** Whether `parent` has groups: on this host, or (a logical parent) on another. */
  hasGroups(parent: NetworkRecord, networks: readonly NetworkRecord[]): boolean {
    if (networks.some((n) => n.group?.parent === parent.networkId)) return true;
    return parent.vni !== undefined && this.deps.remoteGroups?.part(parent, new Map(), new Map()).groups === true;
  }

  /**
   * The OpenFlow plan of `parent`'s family as the records say it (undefined for a parent without
   * groups, or without a gateway); `ofports`: the bridge's, read once by a caller planning many.
   */
  async plan(parent: NetworkRecord, networks: readonly NetworkRecord[], ofports?: Map<string, number>): Promise<GroupPlan | undefined> {
    const { groups: api, qos } = this.deps;
    if (api === undefined || qos === undefined) return undefined;
    const members = networks.filter((n) => n.group?.parent === parent.networkId);
    const gw = parent.ipv4.find((d) => d.gateway !== undefined)?.gateway;
    if (!this.hasGroups(parent, networks) || parent.gatewayPort === undefined || gw === undefined) return undefined;
    const family: GroupNetwork[] = await Promise.all(
      [parent, ...members].map(async (n) => ({
        name: n.group?.name ?? parentName(parent) ?? '',
        tag: n.tag,
        allow: n.group?.allow ?? n.allow ?? [],
        ...(n.qos === undefined ? {} : { qos: n.qos }),
        endpoints: await this.records.endpointsOf(n.networkId),
      })),
    );
    const gw6 = parent.ipv6.find((d) => d.gateway !== undefined)?.gateway;
    const gateway = {
      port: parent.gatewayPort,
      mac: await api.mac(parent.gatewayPort),
      cidr: gw,
      ...(gw6 === undefined ? {} : { cidr6: gw6 }),
    };
    const ports = ofports ?? (await qos.ofports(parent.bridge));
    const remote = this.deps.remoteGroups?.part(parent, new Map(family.map((n) => [n.name, n.tag])), ports);
    if (remote !== undefined && remote.skipped.length > 0)
      this.deps.log.debug({ skipped: remote.skipped }, 'endpoints of the family on other hosts without a tunnel to their host yet');
    const planned = planGroups(parent.tag, gateway, family, ports, remote?.plan);
    if (planned === undefined) {
      throw new OvsnetError(
        'OVS_FAILED',
        `gateway port ${parent.gatewayPort} of ${parentName(parent) ?? parent.networkId} has no OpenFlow number on bridge ${parent.bridge}: cannot apply its groups' rules`,
      );
    }
    if (planned.unknown.length > 0)
      this.deps.log.debug({ unknown: planned.unknown }, 'ovsnet.allow names groups that do not exist (yet): they allow nothing');
    return planned.plan;
  }

  /**
   * Join's step, after the port is up: its family's rules with it (none for other networks).
   * Returns the network whose gateway the endpoint gets: a group's parent (as the rules read it;
   * undefined once gone), else the network itself.
   */
  async joined(n: NetworkRecord): Promise<NetworkRecord | undefined> {
    const family = familyParent(n);
    const parent = family === undefined ? undefined : await this.refresh(family, true);
    if (n.group === undefined) return n;
    // Without OpenFlow access no rules were read: the parent is read here.
    return parent ?? (this.deps.groups === undefined || this.deps.qos === undefined ? this.records.network(n.group.parent) : undefined);
  }

  /** refresh(), a failure logged: the periodic check puts lost flows back. */
  async refreshLogged(parentId: string, endpointOnly = false): Promise<void> {
    await this.refresh(parentId, endpointOnly).catch((err: unknown) => this.warn("apply the endpoint groups' rules", err));
  }

  /** DeleteEndpoint's step, after the record went: its family's rules without it (`network`: its record, if any). */
  async endpointGone(network: NetworkRecord | undefined): Promise<void> {
    const family = network === undefined ? undefined : familyParent(network);
    if (family !== undefined) await this.refreshLogged(family, true);
  }

  /** DeleteNetwork's step: a group leaves its parent's rules; a parent takes them with it, orphaning groups left (logged). */
  async leave(record: NetworkRecord): Promise<void> {
    this.localChanges++;
    if (record.group !== undefined) return this.refreshLogged(record.group.parent);
    const name = parentName(record);
    if (name === undefined) return;
    await this.deps.groups?.remove(record.bridge, record.tag).catch((err: unknown) => this.warn("remove the endpoint groups' rules", err));
    const left = (await this.records.localNetworks()).filter((n) => n.group?.parent === record.networkId).map((n) => n.group?.name);
    if (left.length > 0) {
      this.deps.log.warn(
        { groups: left },
        `network ${name} removed before its endpoint groups, which have no gateway now: remove them too`,
      );
    }
  }

  private warn(what: string, err: unknown): void {
    this.deps.log.warn({ err }, `${what}: ${messageOf(err)}`);
  }
}
