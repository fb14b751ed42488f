/**
 * The Open vSwitch network driver: each Docker network is a VLAN segment on one integration
 * bridge; each endpoint a veth pair whose host end is an OVS access port with the network's
 * tag. Non-internal networks get a gateway (an OVS internal port holding the gateway address
 * on the host) and masquerading.
 *
 * Every create is a list of steps undone in reverse when a later one fails; every delete is
 * idempotent and best effort (a missing port, link or rule counts as done). State lives in the
 * store; OVS ports carry external_ids so that reconcile() finds them again after a restart.
 */
import { OvsnetError, messageOf } from '../errors.js';
import type { DriverDeps } from './deps.js';
import { parseNetworkOptions, type NetworkOptions } from './options.js';
import { checkNetworkSubnets } from './subnet-check.js';
import { names, type IpData, type NetworkRecord, type PortBinding } from './records/records.js';
import type { CreateEndpointRequest, CreateNetworkRequest, JoinResult } from './requests.js';
import { Mutex } from './mutex.js';
import { claimTagStep, releaseTag } from './tags.js';
import { Gateways } from './gateway.js';
import { Reconciler } from './reconcile.js';
import { leaveLogical } from './vxlan/logical.js';
import { joinSegment, segmentMtu } from './vxlan/segment.js';
import { undoAll, type Undo } from './undo.js';
import { DriverRecords } from './records/driver-records.js';
import { endpointRecord } from './records/endpoint-record.js';
import { endpointIds } from './ovs/external-ids.js';
import { gatewayName, vethNames } from './naming.js';
import { Publisher, portmapInfo } from './publishing.js';

export class NetworkDriver {
  private readonly now: () => Date;
  /**
   * Calls that change OVS ports run one at a time, and never while reconcile() runs: reconcile
   * would otherwise see a port whose record is not written yet and remove it.
   */
  private readonly ports = new Mutex();
  /** veth deletions DeleteEndpoint started and did not wait for (see deleteEndpointLocked). */
  private readonly unlinking = new Set<Promise<void>>();

  private readonly gateways: Gateways;
  private readonly reconciler: Reconciler;
  private readonly records: DriverRecords;
  private readonly publisher: Publisher;

  constructor(private readonly deps: DriverDeps) {
    this.now = deps.now ?? (() => new Date());
    this.gateways = new Gateways(deps);
    this.records = new DriverRecords(deps.store, deps.host);
    this.reconciler = new Reconciler(deps, this.gateways, this.records, this.now);
    this.publisher = new Publisher(deps, this.records);
  }

  createNetwork(req: CreateNetworkRequest): Promise<void> {
    return this.ports.run(() => this.createNetworkLocked(req));
  }

  /**
   * options -> logical network -> tag -> bridge -> gateway -> guard flows -> record: each step
   * queues its undo once it has acted, and a failure undoes them in reverse.
   */
  private async createNetworkLocked(req: CreateNetworkRequest): Promise<void> {
    const opts = parseNetworkOptions(req.options);
    if ((await this.records.network(req.networkId)) !== undefined) return; // the same request again: created already
    checkNetworkSubnets(req, opts.allowConnected, this.deps.subnets);
    const undo: Undo[] = [];
    try {
      const vni = await joinSegment(
        this.deps,
        {
          networkId: req.networkId,
          opts,
          subnets: [...req.ipv4, ...req.ipv6].map((d) => d.pool),
          now: this.now,
          // Under the port mutex no other create runs here: a member without a record is a leftover.
          isLeftover: async (other) => (await this.records.network(other)) === undefined,
        },
        undo,
      );
      // A VXLAN network is a local VLAN on this host's bridge, mapped to its VNI by the tunnels.
      const tag = await claimTagStep(this.deps.store, this.deps.host, req.networkId, vni === undefined ? opts.tag : undefined, undo);
      const record = await this.networkRecord(req, opts, tag, vni);
      await this.deps.ovs.ensureBridge(this.deps.bridge, this.deps.datapath());
      await this.gateways.add(record, undo);
      await this.gateways.addGuard(record, undo);
      if (!(await this.records.createNetwork(record))) return; // a concurrent identical request won; its state stands
      this.deps.log.info(
        { networkId: req.networkId, tag, gateway: record.gatewayPort, logical: record.logical, vni: record.vni, mtu: record.mtu },
        'network created',
      );
      this.deps.onNetworksChanged?.();
    } catch (err) {
      await undoAll(undo, this.deps.log, 'create network', req.networkId);
      throw err;
    }
  }

  private async networkRecord(
    req: CreateNetworkRequest,
    opts: NetworkOptions,
    tag: number,
    vni: number | undefined,
  ): Promise<NetworkRecord> {
    const hasGateway = !opts.internal && [...req.ipv4, ...req.ipv6].some((d) => d.gateway !== undefined);
    const gatewayPort = hasGateway ? await gatewayName(this.deps, req.networkId, await this.records.localNetworks()) : undefined;
    return {
      networkId: req.networkId,
      host: this.deps.host,
      ...(opts.logical === undefined || vni === undefined ? {} : { logical: opts.logical, vni }),
      bridge: this.deps.bridge,
      tag,
      mtu: segmentMtu(opts.mtu, vni, this.deps.tunnelMtu),
      internal: opts.internal,
      ipv4: req.ipv4,
      ipv6: req.ipv6,
      ...(gatewayPort === undefined ? {} : { gatewayPort }),
      createdAt: this.now().toISOString(),
    };
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
      // Docker removes no network that has endpoints: any record left is one Docker forgot
      // (its DeleteEndpoint lost to an ovsnet restart). Its published ports go with it.
      for (const ep of await this.records.endpointsOf(networkId))
        await this.bestEffort('remove port mappings', () => this.publisher.revoke(ep));
      await this.records.deleteNetwork(networkId);
      const host = record.host ?? this.deps.host;
      if (record.logical !== undefined) await leaveLogical(this.deps.store, record.logical, host, networkId);
      await releaseTag(this.deps.store, host, record.tag, networkId);
      this.deps.log.info({ networkId }, 'network deleted');
      this.deps.onNetworksChanged?.();
    }
    // Ports and veths of those endpoints, and of Joins cut short: they stay no longer than the network.
    await this.bestEffort('remove what ovsnet left of the network', async () => void (await this.reconciler.sweepNetwork(networkId)));
  }

  /** Records the endpoint; returns a MAC only when Docker gave none (never echo Docker's). */
  async createEndpoint(req: CreateEndpointRequest): Promise<{ mac?: string }> {
    const network = await this.records.requireNetwork(req.networkId);
    const record = endpointRecord(req, network.networkId, this.deps.host, this.now());
    const standing = await this.records.createEndpoint(record);
    if (!this.records.owns(standing) || standing.address !== record.address || standing.addressV6 !== record.addressV6) {
      throw new OvsnetError(
        'ENDPOINT_INVALID',
        `endpoint ${req.endpointId.slice(0, 12)} already exists with address ${standing.address ?? standing.addressV6 ?? ''}`,
      );
    }
    // When ovsnet's IPAM gave the address, its reservation now names the endpoint.
    for (const a of [req.address, req.addressV6]) {
      if (a === '') continue;
      await this.bestEffort('bind the reservation', async () => void (await this.deps.pools?.bindEndpoint(a, req.endpointId)));
    }
    return req.mac === '' ? { mac: record.mac } : {};
  }

  /** Creates the veth pair and the OVS port; the container end is what Docker moves. */
  join(networkId: string, endpointId: string): Promise<JoinResult> {
    return this.ports.run(() => this.joinLocked(networkId, endpointId));
  }

  private async joinLocked(networkId: string, endpointId: string): Promise<JoinResult> {
    const network = await this.records.requireNetwork(networkId);
    const recorded = await this.records.requireEndpoint(networkId, endpointId);
    // Names no other live link holds (IDs may share 12 characters); kept in the record.
    const chosen = await vethNames(this.deps.links, recorded);
    const ep = { ...recorded, ...chosen };
    if (chosen.hostVeth !== recorded.hostVeth) await this.records.updateEndpoint(ep);
    const undo: Undo[] = [];
    try {
      await this.deps.links.createVeth({
        host: ep.hostVeth,
        container: ep.containerVeth,
        mtu: network.mtu,
        mac: ep.mac,
        replace: true, // a leftover of an earlier attempt (a crash between steps): it carries the alias
        txChecksumOff: this.deps.datapath() === 'netdev',
        alias: names.alias(endpointId), // marks it ovsnet's: reconcile deletes no other link
      });
      undo.push(() => this.deps.links.deleteLink(ep.hostVeth));
      await this.deps.ovs.deletePort(ep.hostVeth);
      await this.deps.ovs.addPort(network.bridge, ep.hostVeth, {
        tag: network.tag,
        externalIds: endpointIds(networkId, endpointId),
      });
    } catch (err) {
      await undoAll(undo, this.deps.log, 'join', endpointId);
      throw err;
    }
    const gw = (list: readonly IpData[]) =>
      network.gatewayPort === undefined ? '' : (list.find((d) => d.gateway !== undefined)?.gateway?.split('/')[0] ?? '');
    return { srcName: ep.containerVeth, gateway: gw(network.ipv4), gatewayV6: gw(network.ipv6) };
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
    const ep = await this.records.requireEndpoint(networkId, endpointId).catch(() => undefined);
    // No record of this host's: only what OVS marks as this endpoint's here goes (never by a
    // derived name: another live endpoint may hold it; never another host's record).
    if (ep === undefined) return void (await this.reconciler.removeEndpointPorts(endpointId));
    const { hostVeth } = ep;
    await this.bestEffort('remove port mappings', () => this.publisher.revoke(ep));
    await this.deps.ovs.deletePort(hostVeth);
    await this.records.deleteEndpoint(networkId, endpointId);
    // The kernel takes ~20 ms to delete a veth (an RCU grace period), most of DeleteEndpoint,
    // which Docker waits for when a container goes. The veth is off the bridge and no record
    // names it any more: it is deleted in the background (a missing link counts as done; if
    // ovsnet stops first, the next reconcile removes the leftover, as any veth of no endpoint).
    const unlink: Promise<void> = this.deps.links
      .deleteLink(hostVeth)
      .catch((err: unknown) =>
        this.deps.log.warn({ err }, `cannot delete veth ${hostVeth}: ${messageOf(err)}; the next reconcile removes it`),
      )
      .finally(() => this.unlinking.delete(unlink));
    this.unlinking.add(unlink);
  }

  /** Resolves once the veth deletions started by DeleteEndpoint are done (for stop and tests). */
  async settled(): Promise<void> {
    await Promise.all([...this.unlinking]);
  }

  /** Docker's EndpointOperInfo: where the endpoint is, and its published ports (publishing.ts). */
  async endpointInfo(networkId: string, endpointId: string): Promise<Record<string, unknown>> {
    const network = await this.records.requireNetwork(networkId);
    const ep = await this.records.requireEndpoint(networkId, endpointId);
    const address = ep.address ?? ep.addressV6 ?? '';
    return { bridge: network.bridge, port: ep.hostVeth, tag: String(network.tag), mac: ep.mac, address, ...portmapInfo(ep) };
  }

  /** Publishes the endpoint's ports (publishing.ts). */
  async programExternalConnectivity(networkId: string, endpointId: string, portmap: readonly PortBinding[]): Promise<void> {
    await this.publisher.program(await this.records.requireEndpoint(networkId, endpointId), portmap);
  }

  async revokeExternalConnectivity(networkId: string, endpointId: string): Promise<void> {
    const ep = await this.records.requireEndpoint(networkId, endpointId).catch(() => undefined);
    if (ep !== undefined) await this.publisher.revoke(ep);
  }

  /** Brings OVS and the kernel in line with the store after a restart (see Reconciler.reconcile); holds published ports again. */
  reconcile(): Promise<{ repaired: string[]; removed: string[] }> {
    return this.ports.run(async () => {
      const done = await this.reconciler.reconcile();
      await this.publisher.republish();
      return done;
    });
  }

  /** Puts back lost gateway guard flows (see Reconciler.checkGuards); returns the networks repaired. */
  checkGuards(): Promise<string[]> {
    return this.ports.run(() => this.reconciler.checkGuards());
  }

  /** This host's networks (hosts sharing etcd see every host's records). */
  localNetworks(): Promise<NetworkRecord[]> {
    return this.records.localNetworks();
  }

  // --- internals -------------------------------------------------------------------------

  private async bestEffort(what: string, fn: () => Promise<void>): Promise<void> {
    await fn().catch((err: unknown) => this.deps.log.warn({ err }, `${what}: ${messageOf(err)}`));
  }
}
