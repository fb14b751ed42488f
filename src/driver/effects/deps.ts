/**
 * The side effects the network driver uses, one interface each: the real modules (ovs/ovsdb.ts,
 * links/links.ts, nat.ts, ovs/flows.ts, the IPAM driver) in the daemon, in-memory fakes in unit
 * tests (test/helpers/driver-fakes.ts). Each method says whether a repeat is safe and who
 * cleans up what it made, so that a create's undo and reconcile know what they may call again.
 */
import type { Logger } from '../../lib/log.js';
import type { Store } from '../../store/types.js';
import type { VethSpec } from '../links/links.js';
import type { SpareNames } from '../links/spare-ops.js';
import type { DatapathType, OwnPort, PortOptions } from '../ovs/ovsdb.js';
import type { EndpointRecord, NetworkRecord, PortBinding } from '../model/records.js';
import type { TxnPart, TxnPartDone } from '../records/txn-parts.js';
import type { SubnetRules } from '../model/subnet-check.js';
import type { GuardSegment } from '../ovs/flows.js';
import type { Qos } from '../model/qos-options.js';
import type { GroupPlan } from '../ovs/groups/group-flows.js';
import type { RemotePart } from '../ovs/groups/group-remote.js';
import type { CookieScope } from '../ovs/cookies.js';
import type { Changes, Wanted } from '../ovs/flow-sync.js';
import type { FailMode } from '../ovs/ovsdb.js';
import type { NetRule } from '../model/policy-options.js';
import type { Resolvers } from '../../host/resolvers.js';

/** Open vSwitch's database (OVSDB): the bridge and its ports. */
export interface OvsApi {
  /**
   * Creates the bridge if missing. Idempotent (an existing bridge is left as it is, one another
   * ovsnet creates meanwhile counts as made). Nothing removes it: the bridge outlives networks.
   */
  ensureBridge(bridge: string, datapath: DatapathType, failMode: FailMode): Promise<void>;
  /** The bridge's fail_mode ('' when unset: standalone), undefined when there is no bridge. A read. */
  failMode(bridge: string): Promise<string | undefined>;
  /**
   * Sets the bridge's fail_mode in OVSDB, without waiting for ovs-vswitchd (which may be away).
   * A running ovs-vswitchd flushes a bridge's flows when its fail mode changes (no controller):
   * the caller then waits (waitApplied) and programs them again. Idempotent.
   */
  setFailMode(bridge: string, failMode: FailMode): Promise<void>;
  /** Open_vSwitch other_config:flow-restore-wait (kernel datapath restarts). A read. */
  flowRestoreWait(): Promise<boolean>;
  /** Sets or clears flow-restore-wait. Idempotent. */
  setFlowRestoreWait(on: boolean): Promise<void>;
  /** Whether the bridge exists. A read. */
  bridgeExists(bridge: string): Promise<boolean>;
  /**
   * Adds a port and its interface, tagged and carrying ovsnet's external_ids. Not idempotent:
   * fails if a port of that name exists, unless `replace` is asked (then it takes the old one's
   * place; one OVSDB transaction when there is none). Who made it removes it
   * (deletePort); reconcile removes ports of endpoints and networks the store no longer has.
   */
  addPort(bridge: string, name: string, opts: PortOptions): Promise<void>;
  /**
   * Removes a port from whichever bridge holds it; true when there was one. Idempotent: a
   * missing port is done (false). With `marks`, only a port whose external_ids include them
   * (an endpoint's: endpointMark): a port of that name that is another's stays (false).
   */
  deletePort(name: string, marks?: Readonly<Record<string, string>>): Promise<boolean>;
  /** Every port ovsnet created (found by its external_ids). A read. */
  ownPorts(): Promise<OwnPort[]>;
  /** Waits until ovs-vswitchd has applied the configuration so far. Safe to repeat. */
  waitApplied(): Promise<void>;
  /** Pins an interface's MTU. Idempotent; fails if no such interface. */
  setMtu(name: string, mtu: number): Promise<void>;
}

/** Kernel links, over netlink. */
export interface LinksApi {
  /**
   * Creates a veth pair, host end up and carrying `spec.alias`. Not idempotent unless
   * `spec.replace` (a leftover of that name carrying the same alias is deleted first); a failed
   * create leaves no link. The caller deletes it (deleteLink); reconcile deletes links carrying
   * ovsnet's alias whose endpoint is gone.
   */
  createVeth(spec: VethSpec): Promise<void>;
  /** Deletes a link (its veth peer goes with it). Idempotent: a missing link is done. */
  deleteLink(name: string): Promise<void>;
  /**
   * Keeps a released pair as a spare: both ends down and renamed to `spare`'s names, the host
   * end carrying `alias` (spares.ts). False, nothing changed, when the two are not a pair on the
   * host; a failed step deletes the pair. The spares' owner deletes it (or adopts it).
   */
  parkVeth(host: string, container: string, spare: SpareNames, alias: string): Promise<boolean>;
  /**
   * createVeth's result from a parked spare pair (renamed, no create). A failure leaves neither
   * the spare nor a new pair; the caller then creates one (createVeth).
   */
  adoptVeth(spare: SpareNames, spec: VethSpec): Promise<void>;
  /** Whether a link of this name exists. A read. */
  exists(name: string): Promise<boolean>;
  /** The link's alias ('' for none), undefined when no link has that name. A read. */
  alias(name: string): Promise<string | undefined>;
  /** The host's links whose alias starts with `prefix` (ovsnet's own: see names.alias). A read. */
  aliased(prefix: string): Promise<{ name: string; alias: string }[]>;
  /**
   * Sets MTU and up, and gives the link the address. Idempotent. The address goes with the
   * link (a gateway port removed from OVS takes it).
   */
  configureAddress(name: string, family: 4 | 6, address: Buffer, prefixLength: number, mtu: number): Promise<void>;
}

/** iptables rules in ovsnet's own chains. */
export interface NatApi {
  /**
   * Masquerading (unless `masquerade` is false) and forwarding for a subnet through its gateway
   * port, none between its containers through it when `icc` is false, letting in the sources of
   * `ingress` (-o ovsnet.ingress) of the subnet's family. Idempotent (checks first);
   * removeNetwork undoes it (given the same `ingress`).
   */
  addNetwork(
    networkId: string,
    subnet: string,
    gatewayPort: string,
    masquerade: boolean,
    icc: boolean,
    ingress?: readonly NetRule[],
  ): Promise<void>;
  /** Removes what addNetwork added. Idempotent: a missing rule is done. */
  removeNetwork(networkId: string, subnet: string, gatewayPort: string, ingress?: readonly NetRule[]): Promise<void>;
  /**
   * DNAT for an endpoint's published ports (single host ports) to `address`, replacing any it
   * had of that address's family, in one atomic batch (a failure leaves the endpoint's rules as
   * they were). removePorts undoes it (both families).
   */
  addPorts(endpointId: string, address: string, ports: readonly PortBinding[]): Promise<void>;
  /** Removes the endpoint's port rules. Idempotent: none left is done. */
  removePorts(endpointId: string): Promise<void>;
  /** Removes the port rules of endpoints not in `keep` (12-character ID prefixes); answers those removed. Idempotent. */
  prunePorts(keep: ReadonlySet<string>): Promise<string[]>;
}

/** The host ports of published ports, held as sockets by ovsnet (host-ports.ts). */
export interface HostPortsApi {
  /**
   * Holds one free host port per binding (HostPort, one of HostPort-HostPortEnd, or any for 0)
   * and answers the bindings as published. Idempotent for an endpoint holding ports; on failure
   * holds nothing. release() undoes it; the process ending releases everything.
   */
  claim(target: { endpointId: string; address?: string; addressV6?: string }, wanted: readonly PortBinding[]): Promise<PortBinding[]>;
  /** Frees the endpoint's host ports. Idempotent. */
  release(endpointId: string): Promise<void>;
}

/** OpenFlow rules guarding logical networks' gateways (ovs-vswitchd keeps none across a restart). */
export interface FlowsApi {
  /** Installs the guard flows. Idempotent (add-flow replaces an identical flow); unguardGateway undoes it. */
  guardGateway(bridge: string, segment: GuardSegment, gateways: readonly string[]): Promise<void>;
  /** Removes the segment's guard flows. Idempotent: none left is done. */
  unguardGateway(bridge: string, segment: GuardSegment): Promise<void>;
}

/** Endpoint groups' flows on the bridge (ovs/groups/group-flows.ts), lost when ovs-vswitchd restarts. */
export interface GroupsApi {
  /** Makes the bridge hold exactly the plan's flows for its parent. Idempotent; remove undoes it. */
  apply(bridge: string, plan: GroupPlan): Promise<void>;
  /** Removes every flow of the parent (by its tag). Idempotent. */
  remove(bridge: string, parentTag: number): Promise<void>;
  /** A host link's MAC address (a gateway port: a parent's, an enable_icc=false network's). A read. */
  mac(link: string): Promise<string>;
}

/** What the other hosts add to a logical parent's groups' plan, from the records they share. */
export interface RemoteGroupsApi {
  part(parent: NetworkRecord, localTags: ReadonlyMap<string, number>, ofports: ReadonlyMap<string, number>): RemotePart;
  /** Moves whenever any host's network records change. */
  readonly generation: number;
}

/** Endpoints' QoS on the bridge: OpenFlow meters and flows (ovs/qos-flows.ts), lost when ovs-vswitchd restarts. */
export interface QosApi {
  /** The OpenFlow number of every port of the bridge, by port name. A read. */
  ofports(bridge: string): Promise<Map<string, number>>;
  /** Installs the meter and flows of the port, replacing any it had. Idempotent; remove undoes it. */
  apply(bridge: string, ofport: number, qos: Qos): Promise<void>;
  /** Removes the port's meter and flows. Idempotent: none left is done. */
  remove(bridge: string, ofport: number): Promise<void>;
}

/**
 * The bridge's OpenFlow state within a cookie scope (ovs/flow-sync.ts), lost whole when
 * ovs-vswitchd restarts: compared with what ovsnet wants, and made so in one bundle.
 */
export interface OpenFlowApi {
  /** What sync() would change (flows in the scope; ovsnet's meters when `wanted.meters` is given). A read. */
  diff(bridge: string, scope: CookieScope, wanted: Wanted): Promise<Changes>;
  /** Meters, then every flow change in one bundle, then stale meters. Idempotent: nothing to change changes nothing. */
  sync(bridge: string, scope: CookieScope, wanted: Wanted): Promise<Changes>;
}

/** What the driver asks of ovsnet's IPAM for logical networks (absent: none can be made). */
export interface SharedPoolsApi {
  /**
   * Makes the ovsnet pool `cidr` the logical network's; undefined if ovsnet has no such pool.
   * Idempotent for the same name; fails if another logical network has the pool. Nothing for
   * the driver to undo: the binding lives as long as the pool (Docker's ReleasePool ends it).
   */
  bindLogical(cidr: string, name: string): Promise<string | undefined>;
  /** The logical network whose pool `cidr` is, if any. A read. */
  logicalOf(cidr: string): string | undefined;
  /**
   * Marks ovsnet's reservation of `address` with the endpoint using it; false if ovsnet holds
   * none. Idempotent. The binding goes with the reservation (Docker's ReleaseAddress).
   */
  bindEndpoint(address: string, endpointId: string): Promise<boolean>;
  /**
   * bindEndpoint as compares and writes for the caller's own transaction, when the IPAM knows
   * the reservation as it wrote it (no store call); undefined otherwise. If the compares fail,
   * nothing was bound: the caller uses bindEndpoint.
   */
  bindOps?(address: string, endpointId: string): TxnPart | undefined;
  /**
   * The release of ovsnet's reservation of `address`, bound to `endpointId`, as compares and
   * writes for DeleteEndpoint's own transaction (Docker's ReleaseAddress then has nothing to
   * do); `done` with its outcome. Undefined when it cannot ride there: ReleaseAddress releases.
   */
  releaseOps?(address: string, endpointId: string): TxnPartDone | undefined;
  /**
   * Reserves an address of the ovsnet pool `cidr` for the host itself (an infra port: infra.ts)
   * under `name`; undefined if ovsnet has no such pool. releaseHostAddress undoes it.
   */
  hostAddress(cidr: string, name: string): Promise<string | undefined>;
  /** Gives back an address hostAddress() reserved. Idempotent. */
  releaseHostAddress(cidr: string, address: string): Promise<void>;
}

/** The uplink (OVSNET_UPLINK, uplink/uplink.ts): VLAN networks' trunk onto the physical network. */
export interface UplinkApi {
  /** The interface ('' for none). */
  readonly name: string;
  /** Its MTU once attached; undefined before or without one. */
  mtu(): number | undefined;
  /**
   * Makes the interface the bridge's trunk carrying `tags` (moving the host's addresses to the
   * host port), or puts back one that is no longer configured. Idempotent; UPLINK_INVALID when
   * the interface cannot be the uplink.
   */
  attach(tags: readonly number[]): Promise<void>;
  /** Sets the VLANs the trunk carries (and untagged). Idempotent. */
  carry(tags: readonly number[]): Promise<void>;
}

export interface DriverDeps {
  readonly store: Store;
  readonly log: Logger;
  readonly ovs: OvsApi;
  readonly links: LinksApi;
  readonly nat: NatApi;
  readonly hostPorts: HostPortsApi;
  readonly bridge: string;
  readonly datapath: () => DatapathType;
  /** This host's name in the registry: networks, tags and logical members are per host. */
  readonly host: string;
  readonly flows: FlowsApi;
  readonly pools?: SharedPoolsApi;
  /** Endpoints' QoS (absent: QoS options are refused). */
  readonly qos?: QosApi;
  /** Endpoint groups' flows (absent, or without `qos` for the OpenFlow port numbers: groups are refused). */
  readonly groups?: GroupsApi;
  /** A logical parent's family on other hosts (groups/remote-family.ts; with etcd). */
  readonly remoteGroups?: RemoteGroupsApi;
  /**
   * The bridge's whole OpenFlow state (openflow-state.ts). Absent (tests, tools without OpenFlow
   * access): the bridge is made standalone, a plain learning switch, and nothing is synced.
   */
  readonly openflow?: OpenFlowApi;
  /** This host's tunnel address (OVSNET_VTEP_IP or detected); logical networks need one. */
  readonly vtepIp?: string;
  /** MTU of the interface holding the tunnel address; VXLAN networks default to it minus 50. */
  readonly tunnelMtu?: () => number | undefined;
  /** The uplink; absent: none (VLAN networks across hosts are refused). */
  readonly uplink?: UplinkApi;
  /** OVSNET_MIN_PREFIX and the host's segments for CreateNetwork's checks (absent: the default bound, no host segments). */
  readonly subnets?: SubnetRules;
  /** Released veth pairs kept for reuse (OVSNET_SPARE_VETHS, spares.ts); absent: none. */
  readonly spareVeths?: number;
  /** Called after a network of this host is created or deleted (tunnels follow). */
  readonly onNetworksChanged?: () => void;
  readonly now?: () => Date;
  /** OVSNET_SCOPE (absent: local): global serves Docker swarm networks (vxlan/swarm.ts). */
  readonly scope?: 'local' | 'global';
  /**
   * Swarm service VIPs and their tasks' addresses by network ID, as the local Docker Engine lists
   * them (driver/vip/follower.ts); absent: none (vip/flows.ts programs what it gives).
   */
  readonly vips?: () => ReadonlyMap<string, readonly { readonly vip: string; readonly tasks: readonly string[] }[]>;
  /**
   * The host's resolvers that Docker's embedded DNS server forwards to from containers
   * (host/resolvers.ts): egress rules always let DNS to them pass. Absent: none known.
   */
  readonly resolvers?: () => Promise<Resolvers>;
  /** Announces a joined endpoint's addresses to its network (endpoint/announce.ts); absent: nothing is. */
  readonly announcer?: {
    announce(ep: Pick<EndpointRecord, 'hostVeth' | 'mac' | 'address' | 'addressV6'>): void;
    forget(port: string): void;
  };
}
