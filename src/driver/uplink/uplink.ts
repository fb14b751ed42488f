/**
 * The uplink (OVSNET_UPLINK=IFACE, contiv's vlan-if): the host interface that trunks VLAN
 * networks onto the physical network. At start it becomes a trunk port of the integration
 * bridge carrying the untagged VLAN 0 and the tags of this host's VLAN networks (cluster-wide
 * tags, agreed in the store: records/logical-records.ts), nothing else. IFACE's addresses and
 * routes move to the host port `ovsnet-host` (an OVS internal port on VLAN 0 with IFACE's MAC
 * and MTU); leased addresses (DHCP, router advertisement) refuse the start. Stopping ovsnet
 * leaves all of it in place; starting without OVSNET_UPLINK (or with another interface) puts the
 * old uplink back, addresses and routes included. docs/uplink.md says more.
 */
import { OvsnetError } from '../../lib/errors.js';
import type { Logger } from '../../lib/log.js';
import type { Ovsdb } from '../ovs/ovsdb.js';
import { HostIp } from './host-ip.js';
import { addHostPort, addTrunk, placeOf, portsWithRole, setTrunks, UPLINK_HOST_ROLE, UPLINK_ROLE } from './uplink-ovsdb.js';

/** The host port's name: one uplink per host. */
export const HOST_PORT = 'ovsnet-host';

/** Link kinds refused as the uplink: they aggregate other links. */
const AGGREGATES: Readonly<Record<string, string>> = { bridge: 'a Linux bridge', bond: 'a bond', team: 'a team device' };

export interface UplinkDeps {
  readonly ovs: Ovsdb;
  readonly log: Logger;
  readonly bridge: string;
  /** OVSNET_UPLINK; '' for none. */
  readonly name: string;
  readonly ip?: HostIp;
}

export class Uplink {
  private attachedMtu: number | undefined;
  private readonly ip: HostIp;

  constructor(private readonly deps: UplinkDeps) {
    this.ip = deps.ip ?? new HostIp();
  }

  /** OVSNET_UPLINK ('' for none). */
  get name(): string {
    return this.deps.name;
  }

  /** The uplink's MTU once attached (a VLAN network's MTU); undefined before, or without one. */
  mtu(): number | undefined {
    return this.attachedMtu;
  }

  /**
   * Makes OVSNET_UPLINK the bridge's trunk (after ensureBridge), moving the host's addresses;
   * puts back an uplink of an earlier start that is not OVSNET_UPLINK any more. Idempotent.
   * UPLINK_INVALID (the start is refused) when the interface cannot be the uplink.
   */
  async attach(tags: readonly number[]): Promise<void> {
    const { ovs, bridge, name, log } = this.deps;
    for (const old of await portsWithRole(ovs, UPLINK_ROLE)) if (old !== name) await this.release(old);
    if (name === '') return;
    const link = await this.validate();
    const place = await placeOf(ovs, name);
    if (place?.role !== UPLINK_ROLE) await addTrunk(ovs, bridge, name, tags);
    else await setTrunks(ovs, name, tags);
    await ovs.waitApplied();
    await this.ip.setUp(name);
    const addresses = await this.ip.addresses(name);
    const routes = await this.ip.routes(name);
    if (addresses.length > 0 || routes.length > 0) {
      if ((await placeOf(ovs, HOST_PORT)) === undefined) await addHostPort(ovs, bridge, HOST_PORT, link.mac, link.mtu);
      await ovs.waitApplied(); // the internal device exists once ovs-vswitchd applied it
      await this.ip.setUp(HOST_PORT, link.mtu);
      await this.ip.move(name, HOST_PORT, addresses, routes);
      log.info(
        { uplink: name, hostPort: HOST_PORT, addresses: addresses.map((a) => a.cidr), routes: routes.length },
        'host addresses moved to the host port',
      );
    }
    this.attachedMtu = link.mtu;
    log.info({ uplink: name, bridge, mtu: link.mtu, vlans: tags }, 'uplink attached');
  }

  /** The VLANs the trunk carries: untagged and `tags` (this host's VLAN networks). */
  async carry(tags: readonly number[]): Promise<void> {
    if (this.deps.name === '' || this.attachedMtu === undefined) return;
    await setTrunks(this.deps.ovs, this.deps.name, tags);
  }

  /** Why IFACE cannot be the uplink, as UPLINK_INVALID; else its link. */
  private async validate() {
    const { ovs, bridge, name } = this.deps;
    const refuse = (why: string) => new OvsnetError('UPLINK_INVALID', `OVSNET_UPLINK=${name}: ${why}`);
    const link = await this.ip.link(name);
    if (link === undefined) {
      const names = (await this.ip.linkNames()).filter((n) => n !== 'lo' && n !== bridge && n !== HOST_PORT);
      throw refuse(`this host has no interface ${name}; its interfaces: ${names.join(', ') || 'none'}`);
    }
    if (link.loopback)
      throw refuse('the loopback interface carries no traffic off the host: name the interface cabled to the physical switch');
    // A bridge, bond or team aggregates other links (docker0 holds the containers' veths):
    // trunking it and moving its addresses would cut what hangs from it.
    const what = link.kind === undefined ? undefined : AGGREGATES[link.kind];
    if (what !== undefined) {
      throw refuse(
        `${name} is ${what}, not an interface cabled to the physical switch: name the physical interface itself (with a bond or team, the ports it aggregates cannot be used either; take them out of ${name} first)`,
      );
    }
    if (link.master !== undefined) {
      throw refuse(
        `${name} is a port of ${link.master} (a Linux bridge or bond): take it out (ip link set ${name} nomaster), or name ${link.master} itself`,
      );
    }
    const place = await placeOf(ovs, name);
    if (place !== undefined && place.role !== UPLINK_ROLE) {
      if (place.type === 'internal') throw refuse(`${name} is an Open vSwitch internal port, not a physical interface`);
      if (place.bridge !== undefined) {
        throw refuse(
          `${name} is already a port of Open vSwitch bridge ${place.bridge}: remove it there (ovs-vsctl del-port ${place.bridge} ${name}) or name another interface`,
        );
      }
    }
    if (place?.role === UPLINK_ROLE && place.bridge !== bridge) {
      throw refuse(
        `${name} is ovsnet's uplink on bridge ${place.bridge}, not on OVSNET_BRIDGE=${bridge}: remove it there (ovs-vsctl del-port ${place.bridge} ${name})`,
      );
    }
    const leased = (await this.ip.addresses(name)).filter((a) => a.dynamic);
    if (leased.length > 0) {
      throw refuse(
        `its address ${leased.map((a) => a.cidr).join(', ')} is leased (DHCP or router advertisement), and its client would renew it on ${name}, which becomes a bridge port: give ${name} a static address, or none`,
      );
    }
    return link;
  }

  /** Puts an uplink back as it was: the host port's addresses and routes return, both ports go. */
  private async release(name: string): Promise<void> {
    const { ovs, log } = this.deps;
    const hostPorts = await portsWithRole(ovs, UPLINK_HOST_ROLE);
    if (hostPorts.includes(HOST_PORT) && (await this.ip.link(name)) !== undefined && (await this.ip.link(HOST_PORT)) !== undefined) {
      await this.ip.move(HOST_PORT, name, await this.ip.addresses(HOST_PORT), await this.ip.routes(HOST_PORT));
    }
    for (const p of hostPorts) await ovs.deletePort(p);
    await ovs.deletePort(name);
    await ovs.waitApplied();
    log.info({ uplink: name }, 'uplink released: OVSNET_UPLINK no longer names it; its addresses are back on it');
  }
}
