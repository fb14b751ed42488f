/**
 * Bringing OVS and the kernel in line with the store (NetworkDriver runs these under its port
 * mutex): at start, on every Plugin.Activate and after ovs-vswitchd restarted. The bridge's
 * OpenFlow state is openflow-state.ts's, synced by the driver after this.
 */
import { messageOf } from '../../lib/errors.js';
import { releaseOrphanTags } from '../records/tags.js';
import { Gateways } from '../network/gateway.js';
import { ensureOwnBridge } from '../effects/bridge.js';
import { InfraPorts } from '../network/infra.js';
import { joinLogical } from '../vxlan/logical.js';
import { readLogical } from '../records/logical-records.js';
import type { DriverRecords } from '../records/driver-records.js';
import type { DriverDeps } from '../effects/deps.js';
import { endpointMark, endpointOf, networkOf, roleOf } from '../ovs/external-ids.js';
import { LINK_ALIAS_PREFIX, names, type EndpointRecord, type NetworkRecord } from '../model/records.js';

export class Reconciler {
  constructor(
    private readonly deps: DriverDeps,
    private readonly gateways: Gateways,
    private readonly records: Pick<DriverRecords, 'localNetworks' | 'allEndpoints' | 'deleteEndpoint'>,
    private readonly now: () => Date,
    private readonly infra = new InfraPorts(deps),
  ) {}

  /**
   * After a restart: the bridge, every network's gateway port, address, NAT rules and guard, its infra port,
   * its logical network membership; removes ports and veths of endpoints the store no longer
   * has, and endpoints whose veth is gone. Returns what it repaired and removed.
   */
  async reconcile(): Promise<{ repaired: string[]; removed: string[] }> {
    const repaired: string[] = [];
    const removed: string[] = [];
    const networks = await this.records.localNetworks();
    const endpoints = new Set((await this.records.allEndpoints()).map((e) => e.endpointId));
    if (await ensureOwnBridge(this.deps)) repaired.push(`bridge ${this.deps.bridge}`);
    for (const n of networks) {
      if (n.logical !== undefined && (await this.rejoinLogical(n))) repaired.push(`member of logical network ${n.logical}`);
      if (n.infra !== undefined && !(await this.deps.links.exists(n.infra.port))) repaired.push(`infra port ${n.infra.port}`);
      await this.infra.ensure(n);
      if (n.gatewayPort === undefined) continue;
      if (!(await this.deps.links.exists(n.gatewayPort))) repaired.push(`gateway ${n.gatewayPort}`);
      await this.gateways.ensure(n);
    }
    for (const port of await this.deps.ovs.ownPorts()) {
      const ep = endpointOf(port);
      if (ep !== undefined && !endpoints.has(ep)) {
        await this.deps.ovs.deletePort(port.name);
        await this.deps.links.deleteLink(port.name);
        removed.push(port.name);
      } else if (ep !== undefined && !(await this.deps.links.exists(port.name))) {
        // A joined endpoint whose veth is gone: its container's namespace died with it (a
        // dockerd restart without live-restore). Docker releases the address, but sends
        // DeleteEndpoint only to a plugin it has activated since, so ovsnet cleans up itself.
        const net = networkOf(port) ?? '';
        await this.deps.ovs.deletePort(port.name);
        await this.records.deleteEndpoint(net, ep);
        removed.push(`${port.name} (stale endpoint ${ep.slice(0, 12)})`);
      }
      const role = roleOf(port);
      const net = networkOf(port);
      if ((role === 'gateway' || role === 'infra') && net !== undefined && !networks.some((n) => n.networkId === net)) {
        await this.deps.ovs.deletePort(port.name);
        removed.push(port.name);
      }
    }
    // VLAN tags of this host held by no network: a create that failed, or whose answer was lost.
    for (const tag of await releaseOrphanTags(this.deps.store, this.deps.host, new Set(networks.map((n) => n.networkId)))) {
      removed.push(`VLAN tag ${tag} of no network`);
    }
    removed.push(...(await this.removeOrphanVeths(endpoints)));
    this.deps.log.info({ repaired, removed }, 'reconciled the store with OVS and the kernel');
    return { repaired, removed };
  }

  /**
   * Removes the OVS ports (and their veths) marked as this endpoint's on this host: DeleteEndpoint
   * of an endpoint without a record of this host's. Idempotent.
   */
  async removeEndpointPorts(endpointId: string): Promise<void> {
    for (const port of await this.deps.ovs.ownPorts()) {
      if (endpointOf(port) !== endpointId) continue;
      await this.deps.ovs.deletePort(port.name);
      await this.deps.links.deleteLink(port.name);
    }
    // A veth of it on no port: ovsnet stopped between Join's veth and port, or before deleting it.
    for (const link of await this.deps.links.aliased(names.alias(endpointId))) {
      if (link.alias === names.alias(endpointId)) await this.deps.links.deleteLink(link.name);
    }
  }

  /**
   * What ovsnet left of a network being deleted (DeleteNetwork, after its records went):
   * endpoints Docker forgot while ovsnet was down (a Join or DeleteEndpoint cut short by a
   * crash, Docker's retry refused or never sent) had records, which went with the network's,
   * but kept their OVS ports and veths. Removes the OVS ports marked as this network's whose
   * endpoint has no record, and every veth carrying ovsnet's alias whose endpoint has no record
   * (nobody's: reconcile would remove it at the next start). Nothing unmarked. Idempotent.
   * Returns what it removed.
   */
  async sweepNetwork(networkId: string): Promise<string[]> {
    const endpoints = new Set((await this.records.allEndpoints()).map((e) => e.endpointId));
    const removed: string[] = [];
    for (const port of await this.deps.ovs.ownPorts()) {
      const ep = endpointOf(port);
      if (networkOf(port) !== networkId || (ep !== undefined && endpoints.has(ep))) continue;
      await this.deps.ovs.deletePort(port.name); // its veth carries the alias: it goes below
      removed.push(port.name);
    }
    removed.push(...(await this.removeOrphanVeths(endpoints)));
    if (removed.length > 0) this.deps.log.info({ networkId, removed }, 'removed what ovsnet left of the network');
    return removed;
  }

  /**
   * An endpoint's veth by the name its record gives, before the record goes (DeleteNetwork's
   * forgotten endpoints, DeleteEndpoint of one with no port), when that link is this endpoint's:
   * carrying its alias, or none at all (a Join cut short between creating the pair and marking
   * it, which the alias sweep cannot see; once the record is gone nothing shows it is ovsnet's).
   * A link of that name marked as another endpoint's stays.
   */
  async removeRecordedVeth(ep: Pick<EndpointRecord, 'endpointId' | 'hostVeth'>): Promise<void> {
    const alias = await this.deps.links.alias(ep.hostVeth);
    if (alias === '' || alias === names.alias(ep.endpointId)) await this.deps.links.deleteLink(ep.hostVeth);
  }

  /**
   * DeleteEndpoint's: the endpoint's port by its record's name, only when OVS marks it as this
   * endpoint's (a port of that name that is another's stays); with none, its recorded veth
   * (removeRecordedVeth). True when it was plugged: its pair then goes to the spares.
   */
  async unplug(ep: Pick<EndpointRecord, 'endpointId' | 'hostVeth'>): Promise<boolean> {
    const plugged = await this.deps.ovs.deletePort(ep.hostVeth, endpointMark(ep.endpointId));
    if (!plugged) await this.removeRecordedVeth(ep);
    return plugged;
  }

  /** veths ovsnet made (they carry its alias) whose endpoint is not in `endpoints`; no other link, whatever its name. */
  private async removeOrphanVeths(endpoints: ReadonlySet<string>): Promise<string[]> {
    const removed: string[] = [];
    for (const link of await this.deps.links.aliased(LINK_ALIAS_PREFIX)) {
      if (endpoints.has(link.alias.slice(LINK_ALIAS_PREFIX.length))) continue;
      await this.deps.links.deleteLink(link.name);
      removed.push(link.name);
    }
    return removed;
  }

  /**
   * A host away longer than the reclaim grace period was removed from its logical networks'
   * members by its peers: back, it joins again (with its VNI), so that tunnels reach it.
   */
  private async rejoinLogical(n: NetworkRecord): Promise<boolean> {
    const name = n.logical;
    if (name === undefined) return false;
    try {
      const members = (await readLogical(this.deps.store, name))?.record.members ?? {};
      if (members[this.deps.host]?.networkId === n.networkId) return false;
      await joinLogical(this.deps.store, {
        name,
        encap: n.uplink === undefined ? 'vxlan' : 'vlan',
        vni: n.vni ?? (n.uplink === undefined ? undefined : n.tag),
        subnets: [...n.ipv4, ...n.ipv6].map((d) => d.pool),
        internal: n.internal,
        host: this.deps.host,
        networkId: n.networkId,
        now: this.now(),
      });
      return true;
    } catch (err) {
      this.deps.log.warn({ err, logical: name }, `cannot join logical network ${name} again: ${messageOf(err)}`);
      return false;
    }
  }
}
