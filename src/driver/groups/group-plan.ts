/**
 * A parent network and its groups as ovs/groups/group-flows.ts's plan, pure: what the driver (group-wiring.ts)
 * computes on every Join, DeleteEndpoint, group creation and removal, and reconcile, from the
 * records and the bridge's OpenFlow port numbers, then hands to GroupFlows.apply.
 */
import { formatPrefix, prefix } from '../../lib/cidr.js';
import type { EndpointRecord } from '../model/records.js';
import { effectiveQos, type Qos } from '../model/qos-options.js';
import type { GroupMember, GroupPlan } from '../ovs/groups/group-flows.js';
import type { RemotePlan } from '../ovs/groups/group-remote.js';
import { resolveAllows, type AllowRule } from '../model/group-options.js';

/** The parent or one of its groups: its name (the parent's is its ovsnet.network), tag, allows and endpoints. */
export interface GroupNetwork {
  readonly name: string;
  readonly tag: number;
  readonly allow: readonly AllowRule[];
  /** The network's QoS (-o ovsnet.bandwidth, ...), under each endpoint's own. */
  readonly qos?: Qos;
  readonly endpoints: readonly Pick<EndpointRecord, 'address' | 'addressV6' | 'mac' | 'hostVeth' | 'qos'>[];
}

export interface ParentGateway {
  /** The gateway port's name, its MAC, and its IPv4 address in CIDR form (the parent's subnet). */
  readonly port: string;
  readonly mac: string;
  readonly cidr: string;
  /** Its IPv6 address in CIDR form, on a dual-stack parent. */
  readonly cidr6?: string;
}

export interface PlannedGroups {
  readonly plan: GroupPlan;
  /** Endpoints left out: no port on the bridge yet (between CreateEndpoint and Join), or no IPv4 address. */
  readonly skipped: string[];
  /** Allowed names no group has (yet): `group <- name`. */
  readonly unknown: string[];
}

/** `networks` holds the parent first, then its groups. Undefined when the gateway has no port on the bridge. */
export function planGroups(
  parentTag: number,
  gateway: ParentGateway,
  networks: readonly GroupNetwork[],
  ofports: ReadonlyMap<string, number>,
  remote?: RemotePlan,
): PlannedGroups | undefined {
  const gwPort = ofports.get(gateway.port);
  if (gwPort === undefined) return undefined;
  const tags = new Map(networks.map((n) => [n.name, n.tag]));
  const members: GroupMember[] = [];
  const skipped: string[] = [];
  const unknown: string[] = [];
  for (const n of networks) {
    for (const ep of n.endpoints) {
      const ofport = ofports.get(ep.hostVeth);
      const address = ep.address?.split('/')[0];
      if (ofport === undefined || address === undefined || address.includes(':')) skipped.push(ep.hostVeth);
      else {
        const qos = effectiveQos(n.qos, ep.qos);
        const address6 = gateway.cidr6 === undefined ? undefined : ep.addressV6?.split('/')[0];
        members.push({
          ofport,
          mac: ep.mac,
          address,
          group: n.tag,
          ...(address6 === undefined ? {} : { address6 }),
          ...(qos === undefined ? {} : { qos }),
        });
      }
    }
  }
  const allows = networks.flatMap((n) => {
    const r = resolveAllows(n.tag, n.allow, tags);
    unknown.push(...r.unknown.map((u) => `${n.name} <- ${u}`));
    return r.allows;
  });
  const six = gateway.cidr6 === undefined ? {} : { address6: gateway.cidr6.split('/')[0] ?? '' };
  return {
    plan: {
      parentTag,
      gateway: { ofport: gwPort, mac: gateway.mac, address: gateway.cidr.split('/')[0] ?? '', ...six },
      subnet: formatPrefix(prefix(gateway.cidr)),
      ...(gateway.cidr6 === undefined ? {} : { subnet6: formatPrefix(prefix(gateway.cidr6)) }),
      groups: networks.map((n) => n.tag),
      members,
      allows,
      ...(remote === undefined ? {} : { remote }),
    },
    skipped,
    unknown,
  };
}
