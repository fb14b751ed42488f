/**
 * The read-only admin endpoint on the plugin socket: `GET /ovsnet/v1/info`. Docker calls only
 * POST methods named NetworkDriver.*, IpamDriver.* and Plugin.Activate; this GET is for the CLI
 * (src/cli/locate.ts), which reads from it the settings the daemon runs with (secrets redacted),
 * its version, uptime and the health of its store. It changes nothing.
 */
import type { FastifyInstance } from 'fastify';

export const ADMIN_INFO_PATH = '/ovsnet/v1/info';

export interface StoreHealth {
  /** As the daemon describes it: sqlite:/path or etcd://host:port,... */
  readonly store: string;
  readonly ok: boolean;
  /** The store's revision (ok only). */
  readonly revision?: number;
  /** The round trip of that read, or of the failure. */
  readonly ms: number;
  /** Why not ok. */
  readonly error?: string;
}

/** Swarm service VIPs as the daemon follows them (OVSNET_SCOPE=global): daemon/swarm-vips.ts. */
export interface SwarmVipsInfo {
  /** Whether the last round of reads of the local Engine (OVSNET_DOCKER_HOST) succeeded; false when off. */
  readonly reachable: boolean;
  readonly socket: string;
  readonly lastError?: string;
  readonly updatedAt?: string;
  /** By network ID: each service's VIP and the task addresses programmed behind it. */
  readonly networks: Readonly<
    Record<string, readonly { readonly service: string; readonly vip: string; readonly tasks: readonly string[] }[]>
  >;
}

export interface AdminInfo {
  readonly version: string;
  readonly pid: number;
  readonly startedAt: string;
  readonly uptimeSeconds: number;
  /** Every OVSNET_* setting in effect (defaults included), secrets redacted. */
  readonly settings: Readonly<Record<string, string>>;
  readonly store: StoreHealth;
  readonly swarmVips?: SwarmVipsInfo;
}

export function adminRoutes(app: FastifyInstance, info: () => Promise<AdminInfo>): void {
  app.get(ADMIN_INFO_PATH, () => info());
}
