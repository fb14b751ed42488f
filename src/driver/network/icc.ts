/**
 * enable_icc=false in the driver: a network created with it keeps its flows (network/icc-flows.ts)
 * in line with its records. They are made with the network (the drops from other hosts first,
 * before any container joins), follow every Join before it returns (the container's port is
 * isolated before Docker hands the container its interface) and every DeleteEndpoint, go with
 * the network, and come back with the rest of the bridge's flows (upkeep/openflow-state.ts,
 * which plans them here too). Each change is one bundle in the network's own cookie scope.
 * Without the gateway port's OpenFlow number or MAC the plan fails closed: members reach nothing.
 */
import { messageOf, OvsnetError } from '../../lib/errors.js';
import type { DriverDeps } from '../effects/deps.js';
import { effectiveQos } from '../model/qos-options.js';
import type { EndpointRecord, NetworkRecord } from '../model/records.js';
import type { Undo } from '../model/undo.js';
import { only } from '../ovs/cookies.js';
import { iccCookie, iccFlows, type IccMember, type IccPlan } from './icc-flows.js';
import type { DriverRecords } from '../records/driver-records.js';

export type IccDeps = Pick<DriverDeps, 'openflow' | 'qos' | 'groups' | 'ovs' | 'log'>;

const plain = (cidr: string | undefined): string[] => (cidr === undefined ? [] : [cidr.split('/')[0] ?? '']);

/** CreateNetwork's check: enable_icc=false needs ovsnet's OpenFlow access. */
export function requireIccSupport(deps: IccDeps, icc: boolean): void {
  if (icc || (deps.openflow !== undefined && deps.qos !== undefined && deps.groups !== undefined)) return;
  throw new OvsnetError(
    'NETWORK_OPTION_INVALID',
    '-o com.docker.network.bridge.enable_icc=false: this ovsnet was built without OpenFlow access, which keeps the containers apart; drop the option',
  );
}

export class IccWiring {
  constructor(
    private readonly deps: IccDeps,
    private readonly records: Pick<DriverRecords, 'endpointsOf'>,
  ) {}

  /**
   * The plan of network `n` (enable_icc=false) from its endpoints on this host and the bridge's
   * OpenFlow numbers (`ofports`). Fails closed: a gateway without number or MAC is left out.
   */
  async plan(n: NetworkRecord, endpoints: readonly EndpointRecord[], ofports: ReadonlyMap<string, number>): Promise<IccPlan> {
    const members: IccMember[] = endpoints.flatMap((ep) => {
      const ofport = ofports.get(ep.hostVeth);
      if (ep.networkId !== n.networkId || ofport === undefined) return [];
      const qos = effectiveQos(n.qos, ep.qos);
      const [address] = plain(ep.address);
      const [address6] = plain(ep.addressV6 === '' ? undefined : ep.addressV6);
      return [
        {
          ofport,
          mac: ep.mac,
          ...(address === undefined ? {} : { address }),
          ...(address6 === undefined ? {} : { address6 }),
          ...(qos === undefined ? {} : { qos }),
        },
      ];
    });
    const uplinkPort = n.uplink === undefined ? undefined : ofports.get(n.uplink);
    const segment = n.vni !== undefined ? { vni: n.vni } : uplinkPort === undefined ? undefined : { uplinkPort, vlan: n.tag };
    const gateway = await this.gateway(n, ofports);
    return { tag: n.tag, members, ...(gateway === undefined ? {} : { gateway }), ...(segment === undefined ? {} : { segment }) };
  }

  /** Network creation's step, after the gateway: its flows (drops from other hosts, no member yet); their removal queued. */
  async add(n: NetworkRecord, undo: Undo[]): Promise<void> {
    if (n.icc !== false) return;
    undo.push(() => this.remove(n));
    await this.refresh(n);
  }

  /**
   * Makes the bridge hold exactly network `n`'s flows as its records say now (none unless
   * enable_icc=false). Join's step: a failure fails the Join. Idempotent.
   */
  async refresh(n: NetworkRecord): Promise<void> {
    const { openflow, qos, ovs } = this.deps;
    if (n.icc !== false || openflow === undefined || qos === undefined) return;
    await ovs.waitApplied(); // a port just added has its OpenFlow number once applied
    const plan = await this.plan(n, await this.records.endpointsOf(n.networkId), await qos.ofports(n.bridge));
    await openflow.sync(n.bridge, only(iccCookie(n.tag)), { flows: iccFlows(plan) });
  }

  /** DeleteEndpoint's step, after the record went: the flows without it, a failure logged (the periodic sync repairs). */
  async endpointGone(n: NetworkRecord | undefined): Promise<void> {
    if (n?.icc !== false) return;
    await this.refresh(n).catch((err: unknown) => this.warn(n, err));
  }

  /** Removes every flow of the network's. Idempotent. */
  async remove(n: NetworkRecord): Promise<void> {
    if (n.icc !== false || this.deps.openflow === undefined) return;
    await this.deps.openflow.sync(n.bridge, only(iccCookie(n.tag)), { flows: [] });
  }

  private async gateway(n: NetworkRecord, ofports: ReadonlyMap<string, number>): Promise<IccPlan['gateway']> {
    const port = n.gatewayPort;
    if (port === undefined) return undefined;
    const ofport = ofports.get(port);
    const mac = await this.deps.groups?.mac(port).catch((err: unknown) => void this.warn(n, err));
    if (ofport === undefined || mac === undefined) {
      this.deps.log.warn(
        { network: n.networkId, gateway: port },
        `gateway port ${port} has ${ofport === undefined ? `no OpenFlow number on bridge ${n.bridge}` : 'no MAC address'}: the containers of the enable_icc=false network reach nothing until it is back`,
      );
      return undefined;
    }
    return {
      ofport,
      mac,
      addresses: n.ipv4.flatMap((d) => plain(d.gateway)),
      addresses6: n.ipv6.flatMap((d) => plain(d.gateway)),
    };
  }

  private warn(n: NetworkRecord, err: unknown): void {
    this.deps.log.warn({ err, network: n.networkId }, `enable_icc=false flows: ${messageOf(err)}`);
  }
}
