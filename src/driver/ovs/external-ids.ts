/**
 * The external_ids ovsnet writes on the OVS rows it creates, in one place: they are how a
 * restarted ovsnet (reconcile, the tunnels' sync) and the operator's commands find ovsnet's own
 * bridge and ports again, and what `ovs-vsctl find Port external_ids:ovsnet-role=gateway`
 * matches. Every row carries the owner mark; ports say what they are for.
 */
/** The keys. Changing one orphans the ports a running ovsnet made: never rename. */
const ID = {
  /** ovsnet made this row: 'ovsnet'. */
  owner: 'ovsnet-owner',
  /** The Docker NetworkID of an endpoint's or a gateway's port. */
  network: 'ovsnet-network',
  /** The Docker EndpointID of an endpoint's port (its veth's host end). */
  endpoint: 'ovsnet-endpoint',
  /** What a port that is no endpoint's is: 'gateway', 'infra', 'tunnel', 'uplink' or 'uplink-host'. */
  role: 'ovsnet-role',
  /** A tunnel's peer host, its address and the VNI it carries. */
  peer: 'ovsnet-peer',
  remote: 'ovsnet-remote',
  vni: 'ovsnet-vni',
  /** A tunnel's UDP port, when not VXLAN's 4789 (OVSNET_VXLAN_PORT). */
  port: 'ovsnet-dst-port',
} as const;

/** Marks a row as ovsnet's (every row it creates carries it; ownPorts() selects by it). */
export const OWNER: Readonly<Record<string, string>> = { [ID.owner]: 'ovsnet' };

/** What an endpoint's port carries. */
export const endpointIds = (networkId: string, endpointId: string): Record<string, string> => ({
  [ID.network]: networkId,
  [ID.endpoint]: endpointId,
});

/** What marks a port as this endpoint's, whatever its name (DeleteEndpoint removes no other). */
export const endpointMark = (endpointId: string): Record<string, string> => ({ [ID.endpoint]: endpointId });

/** What a network's gateway port carries. */
export const gatewayIds = (networkId: string): Record<string, string> => ({ [ID.network]: networkId, [ID.role]: 'gateway' });

/** What an infra network's host port carries (infra.ts). */
export const infraIds = (networkId: string): Record<string, string> => ({ [ID.network]: networkId, [ID.role]: 'infra' });

/** What a VXLAN tunnel port carries. */
export const tunnelIds = (peer: string, remoteIp: string, vni: number, port = VXLAN_PORT): Record<string, string> => ({
  [ID.role]: 'tunnel',
  [ID.peer]: peer,
  [ID.remote]: remoteIp,
  [ID.vni]: String(vni),
  ...(port === VXLAN_PORT ? {} : { [ID.port]: String(port) }),
});

/** VXLAN's IANA port, OVS's default for a vxlan port. */
export const VXLAN_PORT = 4789;

/** A port as ownPorts() reads it back. */
type Tagged = { readonly externalIds: Readonly<Record<string, string>> };

/** The endpoint whose port this is, if it is an endpoint's. */
export const endpointOf = (port: Tagged): string | undefined => port.externalIds[ID.endpoint];
/** The network whose port this is (an endpoint's or a gateway), if any. */
export const networkOf = (port: Tagged): string | undefined => port.externalIds[ID.network];
/** 'gateway' or 'tunnel' for such ports; undefined for endpoints' ports. */
export const roleOf = (port: Tagged): string | undefined => port.externalIds[ID.role];
/** The peer address a tunnel port reaches. */
export const remoteOf = (port: Tagged): string | undefined => port.externalIds[ID.remote];
/** A tunnel port's VNI (NaN if it has none). */
export const vniOf = (port: Tagged): number => Number(port.externalIds[ID.vni]);
/** A tunnel port's UDP port. */
export const portOf = (port: Tagged): number => Number(port.externalIds[ID.port] ?? VXLAN_PORT);
