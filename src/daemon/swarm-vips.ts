/**
 * Swarm service VIPs, put together (OVSNET_SCOPE=global with OVSNET_DOCKER_HOST): the follower
 * reads the local Engine's services for this node's swarm networks (driver/vip/), the table it
 * gives is what the bridge's VIP flows are made of (ovs/vip-flows.ts, through the driver's
 * OpenFlow sync, run at once on every change), and connections to a VIP without tasks are refused
 * over the OpenFlow watch connection (ovs/vip-refusal.ts).
 *
 * Tasks on a node ovsnet knows to be gone are left out at once, before swarm's own gossip drops
 * them: a task whose node (its swarm address) is the tunnel address of a host ovsnet has seen
 * live, and which is no longer registered. A node whose swarm address is no ovsnet host's tunnel
 * address is never judged (its tasks stay until the Engine drops them).
 */
import { messageOf } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import { isSwarmNetworkId, type NetworkRecord } from '../driver/model/records.js';
import type { ServiceVip } from '../driver/vip/services.js';
import { describeEngine, VipFollower, type VipStatus, type VipTable } from '../driver/vip/follower.js';
import { Engine, type EngineReader } from '../driver/vip/engine.js';
import { VipRefusals } from '../driver/ovs/vip-refusal.js';
import type { SwarmVipsInfo } from '../plugin-api/admin-routes.js';

export interface SwarmVipsDeps {
  readonly log: Logger;
  /** OVSNET_DOCKER_HOST's socket path; '' when off. */
  readonly socket: string;
  /** This host's networks (the swarm ones with endpoints here are followed). */
  readonly networks: () => Promise<readonly NetworkRecord[]>;
  /** The bridge's OpenFlow state made what the records and the table say. */
  readonly syncFlows: () => Promise<unknown>;
  /** The tunnel addresses of the hosts registered now, this one included. */
  readonly liveVteps: () => ReadonlySet<string>;
  /** A fake Engine, for tests. */
  readonly engine?: EngineReader;
  readonly pollMs?: number;
}

export class SwarmVips {
  private table: VipTable = new Map();
  private readonly seen = new Set<string>();
  private readonly follower: VipFollower | undefined;
  readonly refusals = new VipRefusals();

  constructor(private readonly deps: SwarmVipsDeps) {
    const engine = deps.engine ?? (deps.socket === '' ? undefined : new Engine(deps.socket));
    this.follower =
      engine === undefined
        ? undefined
        : new VipFollower({
            engine,
            log: deps.log,
            ...(deps.pollMs === undefined ? {} : { pollMs: deps.pollMs }),
            networks: async () =>
              (await deps.networks())
                .filter((n) => isSwarmNetworkId(n.networkId))
                .map((n) => ({ networkId: n.networkId, subnets: n.ipv4.map((d) => d.pool) })),
            onChange: (table) => {
              this.table = table;
              deps.syncFlows().catch((err: unknown) => deps.log.warn({ err }, `cannot program the swarm VIPs: ${messageOf(err)}`));
            },
          });
  }

  start(): void {
    if (this.follower === undefined) {
      this.deps.log.warn(
        'OVSNET_DOCKER_HOST=off: swarm services in the default endpoint mode (VIP) get no load balancing on ovsnet networks; --endpoint-mode dnsrr works',
      );
      return;
    }
    const problem = describeEngine(this.deps.socket);
    if (problem !== undefined) this.deps.log.warn(problem);
    this.follower.start();
  }

  stop(): void {
    this.follower?.stop();
  }

  status(): VipStatus | undefined {
    return this.follower?.status();
  }

  /** What the admin endpoint shows (`ovsnet doctor` reads it): the Engine's reachability and the VIPs programmed. */
  info(): SwarmVipsInfo {
    const st = this.follower?.status();
    const networks: Record<string, { service: string; vip: string; tasks: readonly string[] }[]> = {};
    for (const [id, services] of this.vips()) networks[id] = services.map((s) => ({ service: s.service, vip: s.vip, tasks: s.tasks }));
    return {
      reachable: st?.reachable ?? false,
      socket: this.deps.socket,
      ...(st?.lastError === undefined ? {} : { lastError: st.lastError }),
      ...(st?.updatedAt === undefined ? {} : { updatedAt: st.updatedAt.toISOString() }),
      networks,
    };
  }

  /** The VIPs to program now, by network ID: the Engine's, without the tasks of nodes known gone (see the header). */
  vips(): ReadonlyMap<string, readonly ServiceVip[]> {
    if (this.table.size === 0) return this.table;
    const live = this.deps.liveVteps();
    for (const a of live) this.seen.add(a);
    const gone = (node: string | undefined) => node !== undefined && this.seen.has(node) && !live.has(node);
    const out = new Map<string, ServiceVip[]>();
    for (const [network, services] of this.table) {
      out.set(
        network,
        services.map((s) => {
          const tasks = s.tasks.filter((t) => !gone(s.nodes?.[t]));
          return tasks.length === s.tasks.length ? s : { ...s, tasks };
        }),
      );
    }
    return out;
  }

  /** Hosts came or went: the VIPs' tasks follow (a dead node's leave the groups). */
  hostsChanged(): void {
    if (this.table.size === 0) return;
    this.deps.syncFlows().catch((err: unknown) => this.deps.log.debug({ err }, `cannot program the swarm VIPs: ${messageOf(err)}`));
  }
}
