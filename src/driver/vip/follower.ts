/**
 * Follows the local Engine's swarm services on ovsnet's swarm networks, for the VIPs ovsnet
 * programs itself (dockerd makes the load-balancer sandbox for its overlay driver only). Workers
 * get no events for tasks on other nodes, so the follower polls (every pollMs) and reads at once
 * on an Engine event; reads are serialized and coalesced. The table goes to onChange only when it
 * changed. A failed read keeps the network's last good entry (one bad answer must not drop every
 * VIP); a 404 means the Engine has no such network: no services. Reachability changes are logged
 * once each (warn when lost, info when back), never at every poll.
 */
import fs from 'node:fs';
import type { Logger } from '../../lib/log.js';
import { Repeater } from '../../lib/timers.js';
import { networkVerbose, type EngineReader } from './engine.js';
import { engineSubnets, parseServices, type ServiceVip } from './services.js';

/** An ovsnet swarm network with endpoints on this node, and its subnets (ovsnet's own record). */
export interface VipNetwork {
  readonly networkId: string;
  readonly subnets: readonly string[];
}

/** networkId -> its services with a VIP. */
export type VipTable = ReadonlyMap<string, readonly ServiceVip[]>;

export interface VipFollowerDeps {
  readonly engine: EngineReader;
  readonly networks: () => Promise<readonly VipNetwork[]>;
  /** The new table; called only when it differs from the last one given. Must not throw (a throw is logged). */
  readonly onChange: (table: VipTable) => void;
  readonly log: Logger;
  readonly pollMs?: number;
}

export interface VipStatus {
  readonly reachable: boolean;
  readonly lastError?: string;
  readonly networks: number;
  readonly services: number;
  readonly updatedAt?: Date;
}

export class VipFollower {
  private readonly pollMs: number;
  private readonly repeater = new Repeater();
  private events: { close(): void } | undefined;
  private table = new Map<string, readonly ServiceVip[]>();
  private given = '';
  private reading: Promise<void> | undefined;
  private again = false;
  private started = false;
  private stopped = false;
  private reachable = false;
  private lastError: string | undefined;
  /** Whether the Engine's silence was logged since start (a warning per loss, not per poll). */
  private warned = false;
  private updatedAt: Date | undefined;
  private readonly skippedShown = new Map<string, string>();

  constructor(private readonly deps: VipFollowerDeps) {
    this.pollMs = deps.pollMs ?? 500;
  }

  /** Reads now, then every pollMs and on every network, service or container event, until stop(). */
  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    void this.refresh();
    this.repeater.start(
      this.pollMs,
      () => this.refresh(),
      () => undefined,
    );
    this.events = this.deps.engine.events(
      { type: ['network', 'service', 'container'] },
      {
        onEvent: () => void this.refresh(),
        onOpen: () => void this.refresh(),
        onDrop: (err, retryMs) => this.deps.log.debug({ err, retryMs }, 'the Engine events stream dropped; reconnecting'),
      },
    );
  }

  /** Stops the timer and the events stream for good; a read under way finishes without calling onChange. Idempotent. */
  stop(): void {
    this.stopped = true;
    this.repeater.stop();
    this.events?.close();
    this.events = undefined;
  }

  /** One more read (before start() too), coalesced: resolves when a read that began after this call has finished. Never rejects. */
  refresh(): Promise<void> {
    this.again = true;
    this.reading ??= this.loop().finally(() => (this.reading = undefined));
    return this.reading;
  }

  status(): VipStatus {
    let services = 0;
    for (const s of this.table.values()) services += s.length;
    return {
      reachable: this.reachable,
      ...(this.lastError === undefined ? {} : { lastError: this.lastError }),
      networks: this.table.size,
      services,
      ...(this.updatedAt === undefined ? {} : { updatedAt: this.updatedAt }),
    };
  }

  private async loop(): Promise<void> {
    while (this.again && !this.stopped) {
      this.again = false;
      try {
        await this.readAll();
      } catch (err) {
        this.deps.log.error({ err }, 'reading the swarm services failed');
      }
    }
  }

  private async readAll(): Promise<void> {
    let networks: readonly VipNetwork[];
    try {
      networks = await this.deps.networks();
    } catch (err) {
      this.deps.log.debug({ err }, "ovsnet's swarm networks could not be listed; the VIP table is kept");
      return;
    }
    const next = new Map<string, readonly ServiceVip[]>();
    let failure: string | undefined;
    for (const n of networks) {
      const got = await this.readOne(n);
      if (typeof got === 'string') {
        failure ??= got;
        const kept = this.table.get(n.networkId);
        if (kept !== undefined) next.set(n.networkId, kept);
      } else next.set(n.networkId, got);
    }
    if (this.stopped) return;
    this.setReachable(failure);
    this.table = next;
    for (const id of this.skippedShown.keys()) if (!next.has(id)) this.skippedShown.delete(id);
    const canonical = JSON.stringify([...next].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    if (canonical === this.given) return;
    this.given = canonical;
    this.updatedAt = new Date();
    try {
      this.deps.onChange(new Map(next));
    } catch (err) {
      this.deps.log.error({ err }, 'applying the swarm services failed');
    }
  }

  /** The network's services, or why the Engine could not say (a 404 is an answer: none). */
  private async readOne(n: VipNetwork): Promise<readonly ServiceVip[] | string> {
    let body: unknown;
    try {
      body = await this.deps.engine.get(networkVerbose(n.networkId));
    } catch (err) {
      if ((err as { status?: unknown } | undefined)?.status === 404) return [];
      return err instanceof Error ? err.message : String(err);
    }
    const { services, skipped } = parseServices(body, n.subnets.length > 0 ? n.subnets : engineSubnets(body));
    const said = skipped.join('\n');
    if (said !== (this.skippedShown.get(n.networkId) ?? '')) {
      this.skippedShown.set(n.networkId, said);
      if (skipped.length > 0)
        this.deps.log.warn(
          { networkId: n.networkId, skipped },
          'swarm services skipped: the Engine listed entries ovsnet will not program',
        );
    }
    return services;
  }

  private setReachable(failure: string | undefined): void {
    if (failure === undefined) {
      if (!this.reachable && this.lastError !== undefined) this.deps.log.info('the Docker Engine answers again: swarm VIPs followed');
      this.reachable = true;
      return;
    }
    this.lastError = failure;
    if (this.reachable || !this.warned)
      this.deps.log.warn({ error: failure }, 'the Docker Engine does not answer: swarm VIPs kept as last read');
    this.warned = true;
    this.reachable = false;
  }
}

/**
 * Why following would fail at `socket` (the Engine socket, '' = off), for a warning at start;
 * undefined when a socket is there (or following is off).
 */
export function describeEngine(socket: string): string | undefined {
  if (socket === '') return undefined;
  const fix = `mount Docker's socket there (the managed plugin's "docker" mount) or set OVSNET_DOCKER_HOST=unix:///path/of/docker.sock (or off)`;
  let st: fs.Stats;
  try {
    st = fs.statSync(socket);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    return `the Docker Engine socket ${socket} cannot be read (${code}): swarm services' VIPs will not work on ovsnet networks (dnsrr services do); ${fix}`;
  }
  if (!st.isSocket()) {
    return `${socket} is not a socket: swarm services' VIPs will not work on ovsnet networks (dnsrr services do); ${fix}`;
  }
  return undefined;
}
