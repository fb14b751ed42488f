/**
 * The whole of ovsnet's OpenFlow state on its bridge, as the records say it should be: the base
 * flow (effects/bridge.ts), every logical network's gateway guard (network/gateway.ts), every
 * endpoint's QoS meter and flows (ovs/qos-flows.ts), every parent's endpoint-group flows
 * (groups/), every enable_icc=false network's flows (network/icc.ts), every ruled network's
 * egress and ingress flows (network/egress.ts). sync() makes the bridge
 * hold exactly that within ovsnet's cookie space
 * (ovs/cookies.ts), in one bundle (ovs/flow-sync.ts): at start, after ovs-vswitchd restarted
 * (daemon/ovs-watch.ts), and from the periodic check; with nothing to change it changes nothing.
 * secure() and secureWhileAway() turn a bridge an earlier ovsnet made standalone into a secure
 * one, when that costs no packet.
 */
import { OWN } from '../ovs/cookies.js';
import { changeCount, type Changes, type Wanted } from '../ovs/flow-sync.js';
import { groupFlows } from '../ovs/groups/group-flows.js';
import { meterId, meterSpec, qosFlows } from '../ovs/qos-flows.js';
import { BASE_FLOWS } from '../effects/bridge.js';
import type { DriverDeps } from '../effects/deps.js';
import type { DriverRecords } from '../records/driver-records.js';
import type { GroupWiring } from '../groups/group-wiring.js';
import type { IccWiring } from '../network/icc.js';
import { iccFlows } from '../network/icc-flows.js';
import { EgressWiring } from '../network/egress.js';
import { guardFlowsOf } from '../network/gateway.js';
import { effectiveQos } from '../model/qos-options.js';
import type { EndpointRecord, NetworkRecord } from '../model/records.js';
import { isVipGroup, vipFlows, type VipNetwork, type VipState } from '../vip/flows.js';

export type OpenFlowStateDeps = Pick<DriverDeps, 'ovs' | 'openflow' | 'qos' | 'groups' | 'bridge' | 'log' | 'vips' | 'resolvers'>;

/** What a sync did, in words for the log and counts for the metrics. */
export interface SyncReport {
  readonly changes: Changes | undefined;
  /** How many OpenFlow modifications (flow mods and meter commands) it made. */
  readonly modifications: number;
  /** Flows and meters ovsnet wants on the bridge. */
  readonly flows: number;
  readonly meters: number;
}

export class OpenFlowState {
  constructor(
    private readonly deps: OpenFlowStateDeps,
    private readonly records: Pick<DriverRecords, 'localNetworks' | 'endpointsOf' | 'allEndpoints'>,
    private readonly groups: Pick<GroupWiring, 'plan' | 'hasGroups'>,
    private readonly icc: Pick<IccWiring, 'plan'>,
    private readonly egress: Pick<EgressWiring, 'flows'> = new EgressWiring(deps, records),
  ) {}

  /** Every flow and meter ovsnet wants on its bridge now. */
  async wanted(): Promise<Wanted & { meters: Map<number, string> }> {
    const networks = await this.records.localNetworks();
    const flows: string[] = [...BASE_FLOWS];
    const meters = new Map<number, string>();
    const ofports = this.deps.qos === undefined ? new Map<string, number>() : await this.deps.qos.ofports(this.deps.bridge);
    for (const n of networks) flows.push(...guardFlowsOf(n, (name) => ofports.get(name)));
    const byId = new Map(networks.map((n) => [n.networkId, n]));
    // This host's networks' endpoints: only they can have a port here (every flow below is a
    // port's), and hosts sharing etcd do not each read every host's records every check.
    const endpoints = (await Promise.all(networks.map((n) => this.records.endpointsOf(n.networkId)))).flat();
    for (const ep of endpoints) {
      const network = byId.get(ep.networkId);
      const qos = network === undefined ? undefined : effectiveQos(network.qos, ep.qos);
      const ofport = ofports.get(ep.hostVeth);
      if (qos === undefined || ofport === undefined) continue;
      flows.push(...qosFlows(ofport, qos));
      const spec = meterSpec(ofport, qos);
      if (spec !== undefined) meters.set(meterId(ofport), spec);
    }
    for (const parent of networks.filter((n) => this.groups.hasGroups(n, networks))) {
      const plan = await this.groups.plan(parent, networks, ofports).catch((err: unknown) => {
        this.deps.log.warn({ err, network: parent.networkId }, 'cannot plan the endpoint groups of a network; its flows are left out');
        return undefined;
      });
      if (plan !== undefined) flows.push(...groupFlows(plan));
    }
    for (const n of networks.filter((x) => x.icc === false)) flows.push(...iccFlows(await this.icc.plan(n, endpoints, ofports)));
    flows.push(...(await this.egress.flows(networks, endpoints, ofports)));
    const vips = this.vipState(networks, endpoints, ofports);
    flows.push(...vips.flows);
    return { flows, meters, groups: { specs: vips.groups, own: isVipGroup } };
  }

  /** Swarm service VIPs (vip/flows.ts) of this host's networks that have some. */
  private vipState(
    networks: readonly NetworkRecord[],
    endpoints: readonly EndpointRecord[],
    ofports: ReadonlyMap<string, number>,
  ): VipState {
    const table = this.deps.vips?.();
    if (table === undefined || table.size === 0) return { flows: [], groups: new Map() };
    const plans: VipNetwork[] = [];
    for (const n of networks) {
      const services = table.get(n.networkId);
      if (services === undefined || services.length === 0) continue;
      const local = endpoints.flatMap((ep) => {
        const ofport = ofports.get(ep.hostVeth);
        return ep.networkId !== n.networkId || ofport === undefined || ep.address === undefined
          ? []
          : [{ ofport, address: ep.address.split('/')[0] ?? '' }];
      });
      plans.push({ tag: n.tag, services, local });
    }
    return vipFlows(plans);
  }

  /** What sync() would change. A read; undefined without OpenFlow access. */
  async diff(): Promise<Changes | undefined> {
    const api = this.deps.openflow;
    return api === undefined ? undefined : api.diff(this.deps.bridge, OWN, await this.wanted());
  }

  /** Makes the bridge hold exactly what wanted() says, in one bundle (see the header). */
  async sync(): Promise<SyncReport> {
    const api = this.deps.openflow;
    if (api === undefined) return { changes: undefined, modifications: 0, flows: 0, meters: 0 };
    const wanted = await this.wanted();
    const changes = await api.sync(this.deps.bridge, OWN, wanted);
    return { changes, modifications: changeCount(changes), flows: wanted.flows.length, meters: wanted.meters.size };
  }

  /**
   * An earlier ovsnet's bridge is standalone (OVS's own NORMAL flow, where ovsnet's base flow now
   * sits: the two forward alike). Secure differs only while ovs-vswitchd restarts, but changing
   * the mode makes a running ovs-vswitchd flush every flow (tens of milliseconds without any):
   * so it is changed now only when no endpoint of this host is on the bridge (nothing to cut),
   * else while ovs-vswitchd is away (secureWhileAway), before its flows would come back anyway.
   * Returns whether it changed the mode now. Nothing without OpenFlow access.
   */
  async secure(): Promise<boolean> {
    if (this.deps.openflow === undefined) return false;
    const mode = await this.deps.ovs.failMode(this.deps.bridge);
    if (mode === undefined || mode === 'secure') return false;
    if ((await this.records.allEndpoints()).length > 0) {
      this.deps.log.info(
        `bridge ${this.deps.bridge} is fail_mode=${mode || 'standalone'} (made by an earlier ovsnet): it becomes secure the next time ovs-vswitchd restarts, when its flows are lost anyway; until then it forwards exactly as before`,
      );
      return false;
    }
    const wanted = await this.wanted();
    await this.deps.ovs.setFailMode(this.deps.bridge, 'secure');
    await this.deps.ovs.waitApplied();
    await this.deps.openflow.sync(this.deps.bridge, OWN, wanted);
    return true;
  }

  /**
   * ovs-vswitchd is away (restarting): a bridge not secure yet is made so in OVSDB now, so that
   * ovs-vswitchd comes back with it secure, forwarding nothing until ovsnet's flows are in.
   * Returns whether it changed the mode.
   */
  async secureWhileAway(): Promise<boolean> {
    if (this.deps.openflow === undefined) return false;
    const mode = await this.deps.ovs.failMode(this.deps.bridge);
    if (mode === undefined || mode === 'secure') return false;
    await this.deps.ovs.setFailMode(this.deps.bridge, 'secure');
    return true;
  }
}
