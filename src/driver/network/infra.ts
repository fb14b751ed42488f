/**
 * Infra networks (-o ovsnet.infra=true, netplugin's `skipVethPair` for NwType "infra"): the host
 * itself joins the segment through an OVS internal port on the network's tag, holding an address
 * of its own from the network's pool (ovsnet's IPAM hands it out, so on a network across hosts
 * every host's differs). No veth, no container, no NAT: host services listening on it are
 * reachable from the segment's containers and, over the uplink, from the physical VLAN. The
 * gateway, if the network has one, is untouched. Every step is idempotent, so network creation
 * and reconcile share them.
 */
import { OvsnetError } from '../../lib/errors.js';
import { parseCidrAddress } from '../model/addresses.js';
import type { DriverDeps } from '../effects/deps.js';
import type { NetworkRecord } from '../model/records.js';
import type { Undo } from '../model/undo.js';
import { infraIds } from '../ovs/external-ids.js';
import { infraName } from '../effects/naming.js';
import { hostPort } from './gateway.js';

export type InfraDeps = Pick<DriverDeps, 'ovs' | 'links' | 'pools' | 'host'>;

export class InfraPorts {
  constructor(private readonly deps: InfraDeps) {}

  /**
   * Network creation's step: an address of each of the network's pools for the host, then the
   * port, named apart from `others` (this host's networks); their release and removal queued.
   * Returns what the record keeps.
   */
  async add(n: NetworkRecord, undo: Undo[], others: readonly NetworkRecord[]): Promise<NonNullable<NetworkRecord['infra']>> {
    const addresses: string[] = [];
    for (const d of [...n.ipv4, ...n.ipv6]) {
      const address = await this.deps.pools?.hostAddress(d.pool, `infra:${this.deps.host}`);
      if (address === undefined) {
        throw new OvsnetError(
          'NETWORK_OPTION_INVALID',
          `-o ovsnet.infra=true gives the host an address from the network's pool, and ovsnet's IPAM does not hold subnet ${d.pool}: create the network with --ipam-driver ovsnet`,
        );
      }
      undo.push(() => this.release(d.pool, address));
      addresses.push(address);
    }
    const infra = { port: await infraName(this.deps, n.networkId, others), addresses };
    undo.push(() => this.deps.ovs.deletePort(infra.port));
    await this.ensure({ ...n, infra });
    return infra;
  }

  /** Creates (or repairs) the port and its addresses. */
  async ensure(n: NetworkRecord): Promise<void> {
    if (n.infra === undefined) return;
    const { port, addresses } = n.infra;
    await hostPort(this.deps, n, port, infraIds(n.networkId));
    for (const a of addresses) {
      const { family, bytes, bits } = parseCidrAddress(a, 'Infra address');
      await this.deps.links.configureAddress(port, family, bytes, bits, n.mtu);
    }
  }

  /** Removes the port and gives its addresses back to the pool. Idempotent. */
  async remove(n: NetworkRecord): Promise<void> {
    if (n.infra === undefined) return;
    await this.deps.ovs.deletePort(n.infra.port);
    await this.deps.ovs.waitApplied();
    for (const a of n.infra.addresses) {
      const pool = [...n.ipv4, ...n.ipv6].find((d) => sameFamily(d.pool, a))?.pool;
      if (pool !== undefined) await this.release(pool, a);
    }
  }

  private async release(pool: string, address: string): Promise<void> {
    await this.deps.pools?.releaseHostAddress(pool, address);
  }
}

const sameFamily = (pool: string, address: string) => pool.includes(':') === address.includes(':');
