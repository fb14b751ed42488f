/**
 * The Open vSwitch network driver: each Docker network is a VLAN segment on one integration
 * bridge; each endpoint a veth pair whose host end is an OVS access port with the network's
 * tag. Non-internal networks get a gateway (an OVS internal port holding the gateway address
 * on the host) and masquerading; endpoint groups share their parent's (groups/group-wiring.ts).
 * Every create is a list of steps undone in reverse when a later one fails; every delete is
 * idempotent and best effort (a missing port, link or rule counts as done). State lives in the
 * store; OVS ports carry external_ids so that reconcile() finds them again after a restart.
 */
import { ensureOwnBridge } from './effects/bridge.js';
import { messageOf } from '../lib/errors.js';
import type { DriverDeps } from './effects/deps.js';
import { parseNetworkOptions, type NetworkOptions } from './model/options.js';
import { checkNetworkSubnets } from './model/subnet-check.js';
import { isSwarmNetworkId, type EndpointRecord, type NetworkRecord, type PortBinding, type Segment } from './model/records.js';
import { joinResult, type CreateEndpointRequest, type CreateNetworkRequest, type JoinResult } from './model/requests.js';
import { Mutex } from '../lib/locks.js';
import { claimTagStep, releaseTag } from './records/tags.js';
import { Gateways } from './network/gateway.js';
import { Reconciler } from './upkeep/reconcile.js';
import { leaveLogical } from './vxlan/logical.js';
import { joinSegment, segmentMtu } from './vxlan/segment.js';
import { allocateSwarmNetwork, freeSwarmNetwork, swarmScopeOptions, type AllocateRequest } from './vxlan/swarm.js';
import { claimWireTagStep, Trunk } from './uplink/trunk.js';
import { InfraPorts } from './network/infra.js';
import { NetworkRules } from './network/rules.js';
import { undoAll, type Undo } from './model/undo.js';
import { DriverRecords } from './records/driver-records.js';
import { releaseOf } from './records/txn-parts.js';
import { networkRecord } from './records/network-record.js';
import { endpointRecord } from './records/endpoint-record.js';
import { gatewayName, plugUnderFreeNames } from './effects/naming.js';
import { Publisher, portmapInfo } from './ports/publishing.js';
import { SpareVeths } from './endpoint/spares.js';
import { Placements } from './endpoint/placements.js';
import { plugEndpoint } from './endpoint/plug.js';
import { EndpointQos, requireQosSupport } from './qos/endpoint-qos.js';
import { GroupWiring } from './groups/group-wiring.js';
import { OpenFlowState } from './upkeep/openflow-state.js';
import { Upkeep } from './upkeep/upkeep.js';

export class NetworkDriver {
  private readonly now: () => Date;
  /** Calls that change OVS ports run one at a time, never during reconcile() (it would remove a port not recorded yet). */
  private readonly ports = new Mutex();
  /** veth deletions DeleteEndpoint started and did not wait for (see deleteEndpointLocked). */
  private readonly unlinking = new Set<Promise<void>>();

  private readonly gateways: Gateways;
  private readonly reconciler: Reconciler;
  readonly records: DriverRecords;
  private readonly publisher: Publisher;
  private readonly spares: SpareVeths;
  private readonly trunk: Trunk;
  private readonly infra: InfraPorts;
  private readonly qos: EndpointQos;
  private readonly groups: GroupWiring;
  private readonly rules: NetworkRules;
  /** Reconcile, the flows' sync and what follows an ovs-vswitchd restart. */
  readonly upkeep: Upkeep;
  /** Joined endpoints whose container end Docker has not moved yet: the reaper leaves them (endpoint/placements.ts). */
  readonly placements = new Placements();

  constructor(private readonly deps: DriverDeps) {
    this.now = deps.now ?? (() => new Date());
    this.gateways = new Gateways(deps);
    this.records = new DriverRecords(deps.store, deps.host);
    this.reconciler = new Reconciler(deps, this.gateways, this.records, this.now);
    this.publisher = new Publisher(deps, this.records);
    this.spares = new SpareVeths(deps.links, deps.spareVeths ?? 0, deps.log);
    this.trunk = new Trunk(deps, this.records);
    this.infra = new InfraPorts(deps);
    this.qos = new EndpointQos(deps);
    this.groups = new GroupWiring(deps, this.records);
    this.rules = new NetworkRules(deps, this.records);
    const flows = new OpenFlowState(deps, this.records, this.groups, this.rules.icc, this.rules.egress);
    const { ports, trunk, reconciler, spares, publisher } = this;
    this.upkeep = new Upkeep(deps, { ports, trunk, reconciler, spares, publisher, flows });
  }

  createNetwork(req: CreateNetworkRequest): Promise<void> {
    return this.ports.run(() => this.createNetworkLocked(req));
  }

  /**
   * options -> logical network -> tag -> bridge -> gateway -> guard flows -> icc flows -> record: each step
   * queues its undo once it has acted, and a failure undoes them in reverse.
   */
  private async createNetworkLocked(req: CreateNetworkRequest): Promise<void> {
    const swarm = isSwarmNetworkId(req.networkId);
    const parsed = parseNetworkOptions(swarmScopeOptions(req.networkId, req.options, this.scope), req.networkId);
    if ((await this.records.network(req.networkId)) !== undefined) return; // the same request again: created already
    const opts = this.rules.check(req, await this.groups.resolve(req, parsed)); // a group's subnet was checked as its parent's
    if (opts.group === undefined) checkNetworkSubnets(req, opts.allowConnected, this.deps.subnets);
    requireQosSupport(this.deps, opts.qos);
    const undo: Undo[] = [];
    try {
      const segment = await joinSegment(
        this.deps,
        {
          networkId: req.networkId,
          opts,
          // swarmkit allocates (and so records) IPv4 subnets only.
          subnets: [...req.ipv4, ...(swarm ? [] : req.ipv6)].map((d) => d.pool),
          swarm,
          now: this.now,
          // Under the port mutex no other create runs here: a member without a record is a leftover.
          isLeftover: async (other) => (await this.records.network(other)) === undefined,
          localTags: async () => new Set((await this.records.localNetworks()).map((n) => n.tag)),
        },
        undo,
      );
      // VXLAN: a local VLAN on this host's bridge, mapped to its VNI by the tunnels; a VLAN on the uplink: the cluster's tag here too.
      const tag =
        segment.vlan === undefined
          ? await claimTagStep(this.deps.store, this.deps.host, req.networkId, segment.vni === undefined ? opts.tag : undefined, undo)
          : await claimWireTagStep(this.deps, req.networkId, opts.logical ?? '', segment.vlan, undo);
      let record = await this.networkRecord(req, opts, tag, segment);
      await ensureOwnBridge(this.deps);
      await this.gateways.add(record, undo);
      await this.gateways.addGuard(record, undo);
      await this.rules.add(record, undo);
      if (record.uplink !== undefined) await this.trunk.carryStep(record.tag, undo);
      if (opts.infra) record = { ...record, infra: await this.infra.add(record, undo, await this.records.localNetworks()) };
      if (!(await this.records.createNetwork(record))) return; // a concurrent identical request won; its state stands
      this.deps.log.info(
        { networkId: req.networkId, tag, gateway: record.gatewayPort, logical: record.logical, vni: record.vni, mtu: record.mtu },
        'network created',
      );
      if (opts.group !== undefined) await this.groups.refreshLogged(opts.group.parent);
      this.deps.onNetworksChanged?.();
    } catch (err) {
      await undoAll(undo, this.deps.log, 'create network', req.networkId);
      throw err;
    }
  }

  private async networkRecord(req: CreateNetworkRequest, opts: NetworkOptions, tag: number, segment: Segment): Promise<NetworkRecord> {
    const hasGateway = !opts.internal && opts.group === undefined && [...req.ipv4, ...req.ipv6].some((d) => d.gateway !== undefined);
    const gatewayPort = hasGateway ? await gatewayName(this.deps, req.networkId, await this.records.localNetworks()) : undefined;
    const { host, bridge, uplink } = this.deps;
    const mtu = segmentMtu(opts.mtu, segment, this.deps);
    return networkRecord({ req, opts, tag, segment, host, bridge, uplink: uplink?.name ?? '', gatewayPort, mtu, now: this.now() });
  }

  /** The scope Docker is told (GetCapabilities). */
  get scope(): 'local' | 'global' {
    return this.deps.scope ?? 'local';
  }

  /** A swarm manager's AllocateNetwork (vxlan/swarm.ts): the options every node's CreateNetwork gets. */
  allocateNetwork(req: Omit<AllocateRequest, 'host' | 'now'>): Promise<Record<string, string>> {
    return allocateSwarmNetwork(this.deps.store, { ...req, host: this.deps.host, now: this.now() }, this.scope);
  }

  freeNetwork(networkId: string): Promise<void> {
    return isSwarmNetworkId(networkId) ? freeSwarmNetwork(this.deps.store, networkId, this.now()) : Promise.resolve();
  }

  deleteNetwork(networkId: string): Promise<void> {
    return this.ports.run(() => this.deleteNetworkLocked(networkId));
  }

  private async deleteNetworkLocked(networkId: string): Promise<void> {
    await this.settled(); // once `docker network rm` returns, none of its veths is left either
    const record = await this.records.network(networkId);
    if (record !== undefined) {
      await this.bestEffort('remove gateway', () => this.gateways.remove(record));
      await this.bestEffort('remove the gateway guard', () => this.gateways.unguard(record));
      await this.rules.remove(record);
      await this.bestEffort('remove the infra port', () => this.infra.remove(record));
      // Docker removes no network that has endpoints: any record left is one Docker forgot
      // (its DeleteEndpoint lost to an ovsnet restart). Its published ports go with it.
      for (const ep of await this.records.endpointsOf(networkId)) {
        await this.bestEffort('remove port mappings', () => this.publisher.revoke(ep));
        await this.bestEffort('remove its veth', () => this.reconciler.removeRecordedVeth(ep));
      }
      await this.records.deleteNetwork(networkId);
      await this.groups.leave(record);
      const host = record.host ?? this.deps.host;
      if (record.logical !== undefined) await leaveLogical(this.deps.store, record.logical, host, networkId);
      await releaseTag(this.deps.store, host, record.tag, networkId);
      if (record.uplink !== undefined) await this.bestEffort('stop carrying its tag on the uplink', () => this.trunk.carry());
      this.deps.log.info({ networkId }, 'network deleted');
      this.deps.onNetworksChanged?.();
    }
    // Ports and veths of those endpoints, and of Joins cut short: they stay no longer than the network.
    await this.bestEffort('remove what ovsnet left of the network', async () => void (await this.reconciler.sweepNetwork(networkId)));
  }

  /** Records the endpoint; returns a MAC only when Docker gave none (never echo Docker's). */
  async createEndpoint(req: CreateEndpointRequest): Promise<{ mac?: string }> {
    const { endpoint: _standing, ...mac } = await this.createEndpointIn(await this.records.requireNetwork(req.networkId), req);
    return mac;
  }

  /** CreateEndpoint on its network's record, read already (CNI ADD); with the endpoint record that stands. */
  async createEndpointIn(network: NetworkRecord, req: CreateEndpointRequest): Promise<{ mac?: string; endpoint: EndpointRecord }> {
    const record = endpointRecord(req, network.networkId, this.deps.host, this.now());
    requireQosSupport(this.deps, record.qos);
    const endpoint = await this.records.createBound(record, this.deps.pools, (what, fn) => this.bestEffort(what, fn));
    return { ...(req.mac === '' ? { mac: record.mac } : {}), endpoint };
  }

  /** Creates the veth pair and the OVS port; the container end is what Docker moves. */
  join(networkId: string, endpointId: string): Promise<JoinResult> {
    return this.ports.run(() => this.records.requirePair(networkId, endpointId).then((r) => this.joinLocked(r.network, r.endpoint)));
  }

  /** Join of records read already (CNI ADD: those it resolved and created). */
  joinResolved(network: NetworkRecord, endpoint: EndpointRecord): Promise<JoinResult> {
    return this.ports.run(() => this.joinLocked(network, endpoint));
  }

  private async joinLocked(network: NetworkRecord, recorded: EndpointRecord): Promise<JoinResult> {
    // Under the record's names, or the next free ones (IDs may share 12 characters), kept in the record.
    const rules = { qos: this.qos, icc: this.rules.icc, egress: this.rules.egress };
    const plug = (ep: EndpointRecord) => plugEndpoint(this.deps, this.spares, rules, network, ep);
    const save = (ep: EndpointRecord) => this.records.updateEndpoint(ep);
    const ep = await this.placements.join(recorded.endpointId, () => plugUnderFreeNames(this.deps.links, recorded, plug, save));
    // Its family's rules (Docker deletes the endpoint when Join fails), and whose gateway it gets: a group's parent's.
    return joinResult(ep, await this.groups.joined(network));
  }

  /** Leave runs before Docker moves the interface back; the port stays until DeleteEndpoint. */
  async leave(networkId: string, endpointId: string): Promise<void> {
    const ep = await this.records.requireEndpoint(networkId, endpointId).catch(() => undefined);
    if (ep !== undefined) await this.bestEffort('remove port mappings', () => this.publisher.revoke(ep));
  }

  deleteEndpoint(networkId: string, endpointId: string): Promise<void> {
    return this.ports.run(() => this.deleteEndpointLocked(networkId, endpointId));
  }

  private async deleteEndpointLocked(networkId: string, endpointId: string): Promise<void> {
    this.placements.forget(endpointId);
    const { network, endpoint: ep } = await this.records
      .pair(networkId, endpointId)
      .catch(() => ({ network: undefined, endpoint: undefined }));
    // No record of this host's: only what OVS marks as this endpoint's here goes (never by a
    // derived name: another live endpoint may hold it; never another host's record).
    if (ep === undefined) return void (await this.reconciler.removeEndpointPorts(endpointId));
    await this.bestEffort('remove port mappings', () => this.publisher.revoke(ep));
    await this.bestEffort('remove QoS', async () => this.qos.remove(network, ep));
    this.deps.announcer?.forget(ep.hostVeth);
    // Unplugged (Join cut short, or never called), the pair may carry no alias yet (a crash
    // between create and marking): only this record shows it is ovsnet's, so it goes first.
    const plugged = await this.reconciler.unplug(ep);
    await this.records.deleteEndpoint(networkId, endpointId, releaseOf(this.deps.pools, ep));
    await Promise.all([this.groups.endpointGone(network), this.rules.endpointGone(network)]);
    if (!plugged) return;
    // Plugged, it carries the alias (a leftover is reconcile's). Deleting a veth holds the kernel's link lock
    // ~20 ms (an RCU grace period; the next Join waits): kept as a spare (spares.ts) or deleted, in the background.
    const unlink: Promise<void> = this.spares.release(ep.hostVeth, ep.containerVeth).finally(() => this.unlinking.delete(unlink));
    this.unlinking.add(unlink);
  }

  /** Resolves once the veth deletions started by DeleteEndpoint are done (for stop and tests). */
  async settled(): Promise<void> {
    await Promise.all([...this.unlinking]);
  }

  /** Deletes the spare veth pairs (ovsnet stopping: after settled()). */
  dropSpares(): Promise<void> {
    return this.ports.run(() => this.spares.drop());
  }

  /** Docker's EndpointOperInfo: where the endpoint is, and its published ports (publishing.ts). */
  async endpointInfo(networkId: string, endpointId: string): Promise<Record<string, unknown>> {
    const { network, endpoint: ep } = await this.records.requirePair(networkId, endpointId);
    const address = ep.address ?? ep.addressV6 ?? '';
    return { bridge: network.bridge, port: ep.hostVeth, tag: String(network.tag), mac: ep.mac, address, ...portmapInfo(ep) };
  }

  /** Publishes the endpoint's ports (publishing.ts), which its network's ingress rules let in. */
  async programExternalConnectivity(networkId: string, endpointId: string, portmap: readonly PortBinding[]): Promise<void> {
    await this.publisher.program(await this.records.requireEndpoint(networkId, endpointId), portmap);
    await this.ports.run(async () => this.rules.published(await this.records.network(networkId)));
  }

  async revokeExternalConnectivity(networkId: string, endpointId: string): Promise<void> {
    const ep = await this.records.requireEndpoint(networkId, endpointId).catch(() => undefined);
    if (ep !== undefined) await this.publisher.revoke(ep); // ingress rules forget its ports at DeleteEndpoint, which follows
  }

  /** Brings OVS and the kernel in line with the store after a restart (upkeep/upkeep.ts). */
  reconcile(): Promise<{ repaired: string[]; removed: string[] }> {
    return this.upkeep.reconcile();
  }

  /** This host's networks (hosts sharing etcd see every host's records). */
  localNetworks(): Promise<NetworkRecord[]> {
    return this.records.localNetworks();
  }

  private async bestEffort(what: string, fn: () => Promise<void>): Promise<void> {
    await fn().catch((err: unknown) => this.deps.log.warn({ err }, `${what}: ${messageOf(err)}`));
  }
}
