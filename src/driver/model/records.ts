/** What the network driver keeps in the store, and the names it derives from Docker's IDs. */
import { createHash } from 'node:crypto';
import type { Qos } from './qos-options.js';
import type { AllowRule } from './group-options.js';
import type { NetRule } from './policy-options.js';

export interface IpData {
  /** The subnet, e.g. 10.1.0.0/24. */
  readonly pool: string;
  /** Gateway in CIDR form (10.1.0.1/24), as Docker sends it; absent if none. */
  readonly gateway?: string;
}

export interface NetworkRecord {
  readonly networkId: string;
  /** The host whose Docker network this is (hosts sharing etcd see each other's records). */
  readonly host?: string;
  /** Logical network this network is this host's member of, and its VNI (vxlan). */
  readonly logical?: string;
  readonly vni?: number;
  /**
   * A logical network over VLAN (-o ovsnet.encap=vlan): the uplink its tag (the cluster's,
   * the same on every host) is trunked on.
   */
  readonly uplink?: string;
  readonly bridge: string;
  readonly tag: number;
  readonly mtu: number;
  readonly internal: boolean;
  readonly ipv4: readonly IpData[];
  readonly ipv6: readonly IpData[];
  /** false: no masquerade out, IPv4 nor IPv6 (-o com.docker.network.bridge.enable_ip_masquerade=false); absent = true. */
  readonly masquerade?: false;
  /** Host address of published ports that name none (-o com.docker.network.bridge.host_binding_ipv4). */
  readonly hostBinding?: string;
  /**
   * false: the network's containers cannot reach each other, only the gateway (-o
   * com.docker.network.bridge.enable_icc=false: network/icc-flows.ts); absent = true.
   */
  readonly icc?: false;
  /** -o ovsnet.infra=true: the host's own port on the network and its addresses from the pool (infra.ts). */
  readonly infra?: { readonly port: string; readonly addresses: readonly string[] };
  /** OVS internal port holding the gateway addresses on the host; absent for --internal. */
  readonly gatewayPort?: string;
  /** -o ovsnet.bandwidth, ovsnet.burst, ovsnet.dscp: every endpoint's unless its own say otherwise. */
  readonly qos?: Qos;
  /**
   * -o ovsnet.network=NAME without ovsnet.encap: a one-host network named for its endpoint groups
   * to give as their parent (groups/group-wiring.ts).
   */
  readonly groupsName?: string;
  /**
   * -o ovsnet.group=NAME: this network is an endpoint group of `parent` (its NetworkID, on this
   * host): the parent's subnet, pool and gateway, a tag of its own; `allow` as the user gave it.
   */
  readonly group?: { readonly name: string; readonly parent: string; readonly allow: readonly AllowRule[] };
  /** -o ovsnet.allow on a parent: the groups whose containers may open connections into the parent's own. */
  readonly allow?: readonly AllowRule[];
  /**
   * -o ovsnet.egress: the only destinations outside the network its containers' new connections
   * may reach ([]: none but DNS); absent: every one. network/egress-flows.ts enforces it.
   */
  readonly egress?: readonly NetRule[];
  /** -o ovsnet.ingress: the only sources outside whose new connections reach the containers, published ports aside ([]: none); absent: as without. */
  readonly ingress?: readonly NetRule[];
  readonly createdAt: string;
}

export interface PortBinding {
  readonly proto: 'tcp' | 'udp' | 'sctp';
  readonly containerPort: number;
  readonly hostIp: string;
  readonly hostPort: number;
  readonly hostPortEnd: number;
}

export interface EndpointRecord {
  readonly networkId: string;
  readonly endpointId: string;
  /** The host whose endpoint this is (absent in records written before it was kept: its network's). */
  readonly host?: string;
  /** CIDR forms, as Docker gave them. */
  readonly address?: string;
  readonly addressV6?: string;
  readonly mac: string;
  readonly hostVeth: string;
  readonly containerVeth: string;
  /** The container's interface name CreateEndpoint asked for (Join answers it as DstName). */
  readonly ifname?: string;
  /** The port bindings Docker asked for (HostPort 0, or a range, for "any free one"). */
  readonly portmap: readonly PortBinding[];
  /** The ports published for them, one host port each (ProgramExternalConnectivity). */
  readonly published?: readonly PortBinding[];
  /** The endpoint's own QoS (--driver-opt), over its network's. */
  readonly qos?: Qos;
  readonly createdAt: string;
}

/** Where a network is on the wire: a VNI (vxlan), a cluster VLAN tag on the uplink, or neither (one host). */
export interface Segment {
  readonly vni?: number;
  readonly vlan?: number;
}

export interface LogicalMember {
  readonly networkId: string;
  readonly since: string;
}

export type Encap = 'vxlan' | 'vlan';

/**
 * A logical network (vxlan/logical.ts): one network across hosts. Its record in the store holds
 * all but `members`, which are keys of their own (records/logical-records.ts puts them together).
 */
export interface LogicalNetwork {
  readonly name: string;
  readonly encap: Encap;
  /** The ID on the wire: the VNI (vxlan), or the VLAN tag (vlan). */
  readonly vni: number;
  /** Canonical subnets (IPv4 then IPv6), as Docker's IPAM data gave them. */
  readonly subnets: readonly string[];
  readonly internal: boolean;
  /** false: enable_icc=false on every host's network (each member's containers reach only its own gateway); absent = true. */
  readonly icc?: false;
  readonly members: Readonly<Record<string, LogicalMember>>;
  readonly createdBy: string;
  readonly createdAt: string;
  /**
   * A Docker swarm network's (vxlan/swarm.ts): made by AllocateNetwork on a manager, kept while
   * it has no member, deleted once it is freed (FreeNetwork) and its last member has left.
   */
  readonly swarm?: boolean;
  /** When FreeNetwork freed it (its members still leaving). */
  readonly freedAt?: string;
  /**
   * Set (to the host's name) while a host checks that no member is left before deleting it: a
   * join that finds it set clears it, which makes that delete fail (logical-records.ts).
   */
  readonly closing?: string;
}

/** swarmkit's network IDs (identity.NewID); Docker's own are 64 hex. */
export const isSwarmNetworkId = (id: string): boolean => /^[0-9a-z]{25}$/.test(id);

/** Prefix of every gateway port, so one iptables pattern (ovg+) names them all. */
export const GATEWAY_PREFIX = 'ovg';

/** Every veth host end ovsnet makes carries the alias `ovsnet:<EndpointID>`: reconcile deletes only such links. */
export const LINK_ALIAS_PREFIX = 'ovsnet:';

/** How many names an ID may take before ovsnet gives up (each one taken by another live link). */
export const NAME_CANDIDATES = 8;

/**
 * The 12 characters an interface name takes from an ID: its first 12, and when those are taken
 * by another live link (IDs sharing 12 characters), 12 of a hash of the whole ID (candidate k).
 */
function part(id: string, k: number): string {
  return k === 0 ? id.slice(0, 12) : createHash('sha256').update(`${id}/${k}`).digest('hex').slice(0, 12);
}

/**
 * Linux interface names are at most 15 characters: a 3-letter role and 12 characters of ID.
 * The names a network or endpoint got are kept in its record; naming.ts picks the candidate.
 */
export const names = {
  hostVeth: (endpointId: string, k = 0) => `ovh${part(endpointId, k)}`,
  containerVeth: (endpointId: string, k = 0) => `ovc${part(endpointId, k)}`,
  gateway: (networkId: string, k = 0) => `${GATEWAY_PREFIX}${part(networkId, k)}`,
  /** An infra network's host port (network/infra.ts). */
  infra: (networkId: string, k = 0) => `ovi${part(networkId, k)}`,
  /** The alias of an endpoint's veth host end. */
  alias: (endpointId: string) => `${LINK_ALIAS_PREFIX}${endpointId}`,
  // Tunnel ports: tunnelName() in vxlan/tunnel-plan.ts (ovx + VNI + the peer's tunnel address).
} as const;

/**
 * The name a network's endpoint groups give as their parent: a one-host network's
 * -o ovsnet.network, or a logical network's over VXLAN (its groups are on every host it is on).
 */
export function parentName(n: Pick<NetworkRecord, 'groupsName' | 'logical' | 'vni'>): string | undefined {
  return n.groupsName ?? (n.vni === undefined ? undefined : n.logical);
}
