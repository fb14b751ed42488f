/**
 * A network's way out: the gateway port (an OVS internal port holding the gateway addresses on
 * the host, its MTU pinned), masquerading for its subnets (IPv4 and IPv6), forwarding rules for all, and for logical networks the
 * OpenFlow guard that keeps the gateway local (ovs/flows.ts). Every step is idempotent, so network
 * creation and reconcile share them.
 */
import { guardFlows, type GuardSegment } from '../ovs/flows.js';
import { parseCidrAddress } from '../model/addresses.js';
import { gatewayIds } from '../ovs/external-ids.js';
import type { DriverDeps } from '../effects/deps.js';
import type { NetworkRecord } from '../model/records.js';
import type { Undo } from '../model/undo.js';

export type GatewayDeps = Pick<DriverDeps, 'ovs' | 'links' | 'nat' | 'flows'>;

/** The gateway addresses of a network, without their prefix lengths. */
function gatewaysOf(n: NetworkRecord): string[] {
  return [...n.ipv4, ...n.ipv6].flatMap((d) => (d.gateway === undefined ? [] : [d.gateway.split('/')[0] ?? '']));
}

/**
 * Where a network's gateway must be guarded from: the tunnels of its VNI, or the uplink on its
 * tag (a VLAN network across hosts); undefined for a one-host network.
 */
export function guardSegment(n: NetworkRecord): GuardSegment | undefined {
  if (n.vni !== undefined) return { vni: n.vni };
  return n.uplink === undefined ? undefined : { vlan: n.tag, uplink: n.uplink };
}

/**
 * The guard flows of a network with a gateway port (none for a one-host network), the uplink
 * named by its OpenFlow number (`uplinkPort`: a flow file is read without the switch, which
 * alone knows port names); none when the uplink has no number (not on the bridge). Pure.
 */
export function guardFlowsOf(n: NetworkRecord, uplinkPort: (name: string) => number | undefined): string[] {
  const segment = guardSegment(n);
  if (segment === undefined || n.gatewayPort === undefined) return [];
  if (!('vlan' in segment)) return guardFlows(segment, gatewaysOf(n));
  const port = uplinkPort(segment.uplink);
  return port === undefined ? [] : guardFlows({ ...segment, uplink: String(port) }, gatewaysOf(n));
}

/**
 * Creates (or repairs) an OVS internal port of the host on the network's tag, its MTU pinned,
 * and waits until its kernel device exists. Shared with infra ports (infra.ts).
 */
export async function hostPort(
  deps: Pick<DriverDeps, 'ovs' | 'links'>,
  n: NetworkRecord,
  port: string,
  externalIds: Record<string, string>,
): Promise<void> {
  if (!(await deps.links.exists(port))) {
    await deps.ovs.deletePort(port);
    await deps.ovs.addPort(n.bridge, port, { tag: n.tag, type: 'internal', mtu: n.mtu, externalIds });
  } else {
    await deps.ovs.setMtu(port, n.mtu);
  }
  // The kernel device of an internal port, and its MTU, exist once ovs-vswitchd applied them.
  await deps.ovs.waitApplied();
}

export class Gateways {
  constructor(private readonly deps: GatewayDeps) {}

  /** Network creation's step: the gateway port, if the network has one; its removal queued. */
  async add(record: NetworkRecord, undo: Undo[]): Promise<void> {
    if (record.gatewayPort === undefined) return;
    undo.push(() => this.remove(record));
    await this.ensure(record);
  }

  /** The next step: guard flows, for logical networks' gateways only (the same address on every host). */
  async addGuard(record: NetworkRecord, undo: Undo[]): Promise<void> {
    if (guardSegment(record) === undefined || record.gatewayPort === undefined) return;
    undo.push(() => this.unguard(record));
    await this.guard(record);
  }

  /** Creates (or repairs) the gateway port, its addresses and MTU, and masquerading. */
  async ensure(n: NetworkRecord): Promise<void> {
    const port = n.gatewayPort;
    if (port === undefined) return;
    await hostPort(this.deps, n, port, gatewayIds(n.networkId));
    for (const d of [...n.ipv4, ...n.ipv6]) {
      if (d.gateway === undefined) continue;
      const { family, bytes, bits } = parseCidrAddress(d.gateway, 'Gateway');
      await this.deps.links.configureAddress(port, family, bytes, bits, n.mtu);
    }
    // Masquerading and forwarding: out, and in only replies, published ports and -o ovsnet.ingress's sources (IPv4 and IPv6).
    for (const d of [...n.ipv4, ...n.ipv6])
      if (d.gateway !== undefined)
        await this.deps.nat.addNetwork(n.networkId, d.pool, port, n.masquerade !== false, n.icc !== false, n.ingress);
  }

  async remove(n: NetworkRecord): Promise<void> {
    if (n.gatewayPort === undefined) return;
    for (const d of [...n.ipv4, ...n.ipv6])
      if (d.gateway !== undefined) await this.deps.nat.removeNetwork(n.networkId, d.pool, n.gatewayPort, n.ingress);
    await this.deps.ovs.deletePort(n.gatewayPort);
    // ovs-vswitchd removes the internal device (and the host's route to the subnet) after the
    // transaction: wait for it, or a `docker network create` of the same subnet right after
    // `docker network rm` is refused for overlapping that route (the fuzz suite saw it).
    await this.deps.ovs.waitApplied();
  }

  /** A logical network's gateway guard flows (none for other networks). */
  async guard(n: NetworkRecord): Promise<void> {
    const segment = guardSegment(n);
    if (segment === undefined || n.gatewayPort === undefined) return;
    await this.deps.flows.guardGateway(n.bridge, segment, gatewaysOf(n));
  }

  async unguard(n: NetworkRecord): Promise<void> {
    const segment = guardSegment(n);
    if (segment !== undefined) await this.deps.flows.unguardGateway(n.bridge, segment);
  }
}
