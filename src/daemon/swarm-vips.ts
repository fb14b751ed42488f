/**
 * Swarm service VIPs, put together (OVSNET_SCOPE=global with OVSNET_DOCKER_HOST): the follower
 * reads the local Engine's services for this node's swarm networks (driver/vip/), the table it
 * gives is what the bridge's VIP flows are made of (vip/flows.ts, through the driver's
 * OpenFlow sync, run at once on every change), and connections to a VIP without tasks are refused
 * over the OpenFlow watch connection (vip/refusal.ts).
 *
 * Tasks on a node ovsnet knows to be gone are left out at once, before swarm's own gossip drops
 * them: a task whose node (its swarm address) is the tunnel address of a host ovsnet has seen
 * live, and which is no longer registered. A node whose swarm address is no ovsnet host's tunnel
 * address is never judged (its tasks stay until the Engine drops them).
 *
 * A service scaled to no task is no longer listed by the Engine (its list is made of the tasks'
 * entries), while clients may still hold its VIP from a moment before: a VIP gone from the list
 * is kept for VANISHED_GRACE_MS with no task, refusing new connections (ICMP port unreachable)
 * rather than leaving them to time out, then removed.
 */
import { messageOf } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import { isSwarmNetworkId, type NetworkRecord } from '../driver/model/records.js';
import type { ServiceVip } from '../driver/vip/services.js';
import { describeEngine, VipFollower, type VipStatus, type VipTable } from '../driver/vip/follower.js';
import { Engine, type EngineReader } from '../driver/vip/engine.js';
import { VipRefusals } from '../driver/vip/refusal.js';
import type { SwarmVipsInfo } from '../plugin-api/admin-routes.js';

/** How long a VIP gone from the Engine's list keeps refusing connections before its flows go. */
export const VANISHED_GRACE_MS = 10_000;

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
  readonly now?: () => number;
}

export class SwarmVips {
  private table: VipTable = new Map();
  /** VIPs gone from the Engine's list, by network and VIP: kept refusing until `until`. */
  private readonly vanished = new Map<string, { network: string; service: ServiceVip; until: number }>();
  private pruneTimer: NodeJS.Timeout | undefined;
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
            onChange: (table) => this.changed(table),
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
    clearTimeout(this.pruneTimer);
  }

  /** The Engine's table changed: VIPs gone from it kept for the grace (see the header), the flows synced. */
  private changed(table: VipTable): void {
    const now = (this.deps.now ?? Date.now)();
    const listed = new Set([...table].flatMap(([network, services]) => services.map((s) => `${network}/${s.vip}`)));
    for (const [network, services] of this.table) {
      for (const s of services) {
        const key = `${network}/${s.vip}`;
        if (!listed.has(key) && table.has(network))
          this.vanished.set(key, { network, service: { ...s, tasks: [] }, until: now + VANISHED_GRACE_MS });
      }
    }
    for (const key of listed) this.vanished.delete(key);
    this.table = table;
    this.schedulePrune();
    this.sync('warn');
  }

  private schedulePrune(): void {
    clearTimeout(this.pruneTimer);
    if (this.vanished.size === 0) return;
    const next = Math.min(...[...this.vanished.values()].map((v) => v.until));
    this.pruneTimer = setTimeout(
      () => {
        const now = (this.deps.now ?? Date.now)();
        for (const [key, v] of this.vanished) if (v.until <= now) this.vanished.delete(key);
        this.schedulePrune();
        this.sync('warn');
      },
      Math.max(0, next - (this.deps.now ?? Date.now)()) + 10,
    );
    this.pruneTimer.unref();
  }

  private sync(level: 'warn' | 'debug'): void {
    this.deps.syncFlows().catch((err: unknown) => this.deps.log[level]({ err }, `cannot program the swarm VIPs: ${messageOf(err)}`));
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
    if (this.table.size === 0 && this.vanished.size === 0) return this.table;
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
    for (const v of this.vanished.values()) {
      if (!out.has(v.network)) continue; // the network's gone from here: nothing to refuse for
      out.set(v.network, [...(out.get(v.network) ?? []), v.service]);
    }
    return out;
  }

  /** Hosts came or went: the VIPs' tasks follow (a dead node's leave the groups). */
  hostsChanged(): void {
    if (this.table.size === 0) return;
    this.sync('debug');
  }
}
