/**
 * A network's way out: the gateway port (an OVS internal port holding the gateway addresses on
 * the host, its MTU pinned), masquerading for its IPv4 subnets, forwarding rules for all, and for logical networks the
 * OpenFlow guard that keeps the gateway local (ovs/flows.ts). Every step is idempotent, so network
 * creation and reconcile share them.
 */
import { guardFlows } from './ovs/flows.js';
import { parseCidrAddress } from './addresses.js';
import { gatewayIds } from './ovs/external-ids.js';
import type { DriverDeps } from './deps.js';
import type { NetworkRecord } from './records/records.js';
import type { Undo } from './undo.js';

export type GatewayDeps = Pick<DriverDeps, 'ovs' | 'links' | 'nat' | 'flows'>;

/** The gateway addresses of a network, without their prefix lengths. */
function gatewaysOf(n: NetworkRecord): string[] {
  return [...n.ipv4, ...n.ipv6].flatMap((d) => (d.gateway === undefined ? [] : [d.gateway.split('/')[0] ?? '']));
}

/** How many guard flows a logical network with a gateway has when all is well. */
export function guardFlowCount(n: NetworkRecord): number {
  return n.vni === undefined ? 0 : guardFlows(n.vni, gatewaysOf(n)).length;
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
    if (record.vni === undefined || record.gatewayPort === undefined) return;
    undo.push(() => this.unguard(record));
    await this.guard(record);
  }

  /** Creates (or repairs) the gateway port, its addresses and MTU, and masquerading. */
  async ensure(n: NetworkRecord): Promise<void> {
    const port = n.gatewayPort;
    if (port === undefined) return;
    if (!(await this.deps.links.exists(port))) {
      await this.deps.ovs.deletePort(port);
      await this.deps.ovs.addPort(n.bridge, port, {
        tag: n.tag,
        type: 'internal',
        mtu: n.mtu,
        externalIds: gatewayIds(n.networkId),
      });
    } else {
      await this.deps.ovs.setMtu(port, n.mtu);
    }
    // The kernel device of an internal port, and its MTU, exist once ovs-vswitchd applied them.
    await this.deps.ovs.waitApplied();
    for (const d of [...n.ipv4, ...n.ipv6]) {
      if (d.gateway === undefined) continue;
      const { family, bytes, bits } = parseCidrAddress(d.gateway, 'Gateway');
      await this.deps.links.configureAddress(port, family, bytes, bits, n.mtu);
    }
    // Masquerading (IPv4) and forwarding: out, and in only replies and published ports (IPv4 and IPv6).
    for (const d of [...n.ipv4, ...n.ipv6]) if (d.gateway !== undefined) await this.deps.nat.addNetwork(n.networkId, d.pool, port);
  }

  async remove(n: NetworkRecord): Promise<void> {
    if (n.gatewayPort === undefined) return;
    for (const d of [...n.ipv4, ...n.ipv6])
      if (d.gateway !== undefined) await this.deps.nat.removeNetwork(n.networkId, d.pool, n.gatewayPort);
    await this.deps.ovs.deletePort(n.gatewayPort);
    // ovs-vswitchd removes the internal device (and the host's route to the subnet) after the
    // transaction: wait for it, or a `docker network create` of the same subnet right after
    // `docker network rm` is refused for overlapping that route (the fuzz suite saw it).
    await this.deps.ovs.waitApplied();
  }

  /** A logical network's gateway guard flows (none for other networks). */
  async guard(n: NetworkRecord): Promise<void> {
    if (n.vni === undefined || n.gatewayPort === undefined) return;
    await this.deps.flows.guardGateway(n.bridge, n.vni, gatewaysOf(n));
  }

  async unguard(n: NetworkRecord): Promise<void> {
    if (n.vni !== undefined) await this.deps.flows.unguardGateway(n.bridge, n.vni);
  }
}
