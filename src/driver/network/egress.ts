/**
 * Egress and ingress rules in the driver (-o ovsnet.egress, -o ovsnet.ingress): CreateNetwork's
 * checks, and each ruled network's OpenFlow plan (egress-flows.ts) from the records, the
 * bridge's port numbers, the ways out's MACs and the host's resolvers. The plan follows the
 * records: refresh() at Join (before the container runs: Join fails if the rules cannot be
 * applied), when ports are published, at DeleteEndpoint (which forgets its published ports too);
 * remove() at DeleteNetwork; and the whole bridge's sync (upkeep/openflow-state.ts) takes flows()
 * at start, after ovs-vswitchd restarts and every 10 s, so a changed resolv.conf is followed. A network
 * without rules costs nothing here: no OpenFlow call. The routed sources ingress lets in also
 * pass the host's firewall (network/gateway.ts, ports/nat-rules.ts).
 */
import { OvsnetError, messageOf } from '../../lib/errors.js';
import type { DriverDeps } from '../effects/deps.js';
import type { NetworkOptions } from '../model/options.js';
import { checkPolicy } from '../model/policy-options.js';
import type { EndpointRecord, NetworkRecord } from '../model/records.js';
import type { CreateNetworkRequest } from '../model/requests.js';
import { egressFlows, egressScope, type EgressPlan, type Way } from './egress-flows.js';
import type { DriverRecords } from '../records/driver-records.js';

export type EgressDeps = Pick<DriverDeps, 'openflow' | 'qos' | 'groups' | 'resolvers' | 'log' | 'ovs'>;
type Records = Pick<DriverRecords, 'localNetworks' | 'allEndpoints'>;

export const hasRules = (n: NetworkRecord): boolean => n.egress !== undefined || n.ingress !== undefined;

const plain = (cidr: string | undefined): string[] => (cidr === undefined || cidr === '' ? [] : [cidr.split('/')[0] ?? '']);

export class EgressWiring {
  /** The last reason the resolvers were unknown, said once per change. */
  private unknownDns = '';

  constructor(
    private readonly deps: EgressDeps,
    private readonly records: Records,
  ) {}

  /** CreateNetwork's check, before anything is made (the options' forms were checked when parsed): the options, if they pass. */
  check(req: Pick<CreateNetworkRequest, 'ipv4' | 'ipv6'>, opts: NetworkOptions): NetworkOptions {
    if (opts.egress === undefined && opts.ingress === undefined) return opts;
    if (this.deps.openflow === undefined || this.deps.qos === undefined || this.deps.groups === undefined) {
      throw new OvsnetError(
        'NETWORK_OPTION_INVALID',
        `-o ${opts.egress === undefined ? 'ovsnet.ingress' : 'ovsnet.egress'}: this ovsnet has no OpenFlow access, which egress and ingress rules need`,
      );
    }
    checkPolicy(opts, { v4: req.ipv4.length > 0, v6: req.ipv6.length > 0, internal: opts.internal });
    return opts;
  }

  /**
   * The flows of every ruled network among `networks` (this host's), for the whole bridge's sync.
   * A ruled network whose plan cannot be made (a way out's MAC unreadable) fails the whole:
   * leaving its flows out would open it. `only`: that network's flows alone.
   */
  async flows(
    networks: readonly NetworkRecord[],
    endpoints: readonly EndpointRecord[],
    ofports: ReadonlyMap<string, number>,
    only?: string,
  ): Promise<string[]> {
    const ruled = networks.filter((n) => hasRules(n) && (only === undefined || n.networkId === only));
    if (ruled.length === 0) return [];
    const dns = await this.dns();
    const flows: string[] = [];
    for (const n of ruled) {
      const plan = await this.plan(n, networks, endpoints, ofports, dns);
      if (plan !== undefined) flows.push(...egressFlows(plan));
    }
    return flows;
  }

  /** The network's flows made what its records say, in one bundle; nothing for a network without rules. */
  async refresh(n: NetworkRecord | undefined): Promise<void> {
    const { openflow, qos } = this.deps;
    if (n === undefined || !hasRules(n) || openflow === undefined || qos === undefined) return;
    await this.deps.ovs.waitApplied(); // a port just added has its OpenFlow number once applied
    const [networks, endpoints, ofports] = await Promise.all([
      this.records.localNetworks(),
      this.records.allEndpoints(),
      qos.ofports(n.bridge),
    ]);
    const flows = await this.flows(networks, endpoints, ofports, n.networkId);
    await openflow.sync(n.bridge, egressScope(n.tag), { flows });
  }

  /** refresh(), a failure logged: the periodic sync puts the flows right. */
  async refreshLogged(n: NetworkRecord | undefined): Promise<void> {
    await this.refresh(n).catch((err: unknown) =>
      this.deps.log.warn({ err }, `cannot apply the egress and ingress rules: ${messageOf(err)}`),
    );
  }

  /** DeleteNetwork's step: the network's flows gone. Idempotent. */
  async remove(n: NetworkRecord): Promise<void> {
    if (hasRules(n)) await this.deps.openflow?.sync(n.bridge, egressScope(n.tag), { flows: [] });
  }

  /**
   * One network's plan: its ways out (a group's: its parent's gateway), members with a port on
   * the bridge, subnets; undefined when it has no way out on the bridge (no way, nothing to rule).
   */
  private async plan(
    n: NetworkRecord,
    networks: readonly NetworkRecord[],
    endpoints: readonly EndpointRecord[],
    ofports: ReadonlyMap<string, number>,
    dns: EgressPlan['dns'],
  ): Promise<EgressPlan | undefined> {
    const owner = n.group === undefined ? n : networks.find((p) => p.networkId === n.group?.parent);
    if (owner === undefined) return undefined;
    const ways: Way[] = [];
    const way = async (port: string | undefined, addresses: string[]) => {
      const ofport = port === undefined ? undefined : ofports.get(port);
      if (port === undefined || ofport === undefined) return;
      const mac = await this.deps.groups?.mac(port);
      if (mac !== undefined) ways.push({ ofport, mac, addresses });
    };
    await way(
      owner.gatewayPort,
      [...owner.ipv4, ...owner.ipv6].flatMap((d) => plain(d.gateway)),
    );
    if (n.group === undefined) await way(n.infra?.port, n.infra?.addresses.flatMap(plain) ?? []);
    if (ways.length === 0) return undefined;
    const members = endpoints.flatMap((ep) => {
      const ofport = ofports.get(ep.hostVeth);
      if (ep.networkId !== n.networkId || ofport === undefined) return [];
      return [{ ofport, mac: ep.mac, published: (ep.published ?? []).map((b) => ({ proto: b.proto, port: b.containerPort })) }];
    });
    return {
      tag: n.tag,
      ways,
      subnets: [...owner.ipv4, ...owner.ipv6].map((d) => d.pool),
      // A logical network's peers are routed only once it has groups (one host's are named parents).
      peers: n.group !== undefined || n.groupsName !== undefined || networks.some((g) => g.group?.parent === n.networkId),
      members,
      ...(n.egress === undefined ? {} : { egress: n.egress }),
      ...(n.ingress === undefined ? {} : { ingress: n.ingress }),
      dns,
    };
  }

  /** The host's resolvers; any address when they cannot be known (said once per reason: DNS must keep working). */
  private async dns(): Promise<EgressPlan['dns']> {
    const found = (await this.deps.resolvers?.()) ?? { servers: [], from: 'none' };
    if ('servers' in found) {
      this.unknownDns = '';
      return found.servers;
    }
    if (found.unknown !== this.unknownDns) {
      this.unknownDns = found.unknown;
      this.deps.log.warn(
        `${found.unknown}: egress rules let DNS (port 53) to any address pass, so that containers' names still resolve; to narrow it, run ovsnet where it sees the host's resolvers (docs/egress.md)`,
      );
    }
    return 'any';
  }
}
