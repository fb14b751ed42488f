/**
 * What Docker's network-driver calls ask of NetworkDriver and what it answers, after
 * src/plugin-api has translated the wire (docker-plugin-protocol: CreateNetwork, CreateEndpoint,
 * Join). Types, and Join's answer built from the records.
 */
import type { EndpointRecord, IpData, NetworkRecord, PortBinding } from './records.js';

/** CreateNetwork: Docker's NetworkID, its options (-o under com.docker.network.generic) and IPAM data. */
export interface CreateNetworkRequest {
  readonly networkId: string;
  readonly options: Record<string, unknown>;
  readonly ipv4: readonly IpData[];
  readonly ipv6: readonly IpData[];
}

/** CreateEndpoint: '' for an address, addressV6 or MAC Docker did not give. */
export interface CreateEndpointRequest {
  readonly networkId: string;
  readonly endpointId: string;
  readonly address: string;
  readonly addressV6: string;
  readonly mac: string;
  readonly portmap: readonly PortBinding[];
  /** The interface name asked for (com.docker.network.endpoint.ifname, checked at the wire), if any. */
  readonly ifname?: string;
  /** CreateEndpoint's Options: Docker's keys, and the endpoint's driver options (--driver-opt) at the top level. */
  readonly options?: Readonly<Record<string, unknown>>;
}

/** Join's answer: the interface Docker moves into the container, and gateways ('' if none). */
export interface JoinResult {
  readonly srcName: string;
  /** The name in the container, when CreateEndpoint asked for one. */
  readonly dstName?: string;
  readonly gateway: string;
  readonly gatewayV6: string;
}

/** Join's answer: the container end, and the gateways of `via` (the network, or a group's parent; none once gone). */
export function joinResult(ep: EndpointRecord, via: NetworkRecord | undefined): JoinResult {
  const gw = (list: readonly IpData[]) =>
    via?.gatewayPort === undefined ? '' : (list.find((d) => d.gateway !== undefined)?.gateway?.split('/')[0] ?? '');
  const dstName = ep.ifname === undefined ? {} : { dstName: ep.ifname };
  return { srcName: ep.containerVeth, ...dstName, gateway: gw(via?.ipv4 ?? []), gatewayV6: gw(via?.ipv6 ?? []) };
}
