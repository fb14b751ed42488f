/**
 * The record CreateNetwork writes, built from Docker's request and the steps before it (pure):
 * the segment joined (a VXLAN VNI or an uplink VLAN), the tag claimed, the gateway's port name.
 */
import type { NetworkOptions } from '../model/options.js';
import { qosField } from '../model/qos-options.js';
import type { CreateNetworkRequest } from '../model/requests.js';
import type { NetworkRecord, Segment } from '../model/records.js';

export interface NetworkRecordParts {
  readonly req: CreateNetworkRequest;
  readonly opts: NetworkOptions;
  readonly tag: number;
  readonly segment: Segment;
  readonly host: string;
  readonly bridge: string;
  /** The uplink interface (OVSNET_UPLINK), for a VLAN network on it. */
  readonly uplink: string;
  readonly gatewayPort: string | undefined;
  /** The network's MTU (vxlan/segment.ts segmentMtu). */
  readonly mtu: number;
  readonly now: Date;
}

export function networkRecord(p: NetworkRecordParts): NetworkRecord {
  const { req, opts, segment } = p;
  const { vni, vlan } = segment;
  return {
    networkId: req.networkId,
    host: p.host,
    ...(opts.logical === undefined || vni === undefined ? {} : { logical: opts.logical, vni }),
    ...(opts.logical === undefined || vlan === undefined ? {} : { logical: opts.logical, uplink: p.uplink }),
    bridge: p.bridge,
    tag: p.tag,
    mtu: p.mtu,
    internal: opts.internal,
    ipv4: req.ipv4,
    ipv6: req.ipv6,
    ...(p.gatewayPort === undefined ? {} : { gatewayPort: p.gatewayPort }),
    ...(opts.masquerade ? {} : { masquerade: false as const }),
    ...(opts.hostBinding === undefined ? {} : { hostBinding: opts.hostBinding }),
    ...(opts.icc ? {} : { icc: false as const }),
    ...qosField(opts.qos),
    ...(opts.groupsName === undefined ? {} : { groupsName: opts.groupsName }),
    ...(opts.group === undefined ? {} : { group: opts.group }),
    ...(opts.allow.length === 0 ? {} : { allow: opts.allow }),
    ...(opts.egress === undefined ? {} : { egress: opts.egress }),
    ...(opts.ingress === undefined ? {} : { ingress: opts.ingress }),
    createdAt: p.now.toISOString(),
  };
}
