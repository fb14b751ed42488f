/**
 * What an operator's command works with: the settings located the way the daemon got them
 * (locate.ts), said on stderr where they disagree with the daemon's, then the store and OVSDB
 * opened from them and closed after.
 */
import { loadConfig, type Config } from '../config/config.js';
import { OvsnetError } from '../lib/errors.js';
import { Ovsdb } from '../driver/ovs/ovsdb.js';
import { openStore } from '../store/open.js';
import type { Store } from '../store/types.js';
import { DOCKER_SOCKET } from './docker-api.js';
import { ENV_FILE, locate, type Location } from './locate.js';

/** What main.ts hands the CLI: the process's environment and where to write. */
export interface CliContext {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly out: (text: string) => void;
  readonly err: (text: string) => void;
}

/** Docker's socket: DOCKER_HOST when it is a unix:// one, as the docker CLI reads it. */
export function dockerSocketOf(env: CliContext['env']): string {
  const host = env.DOCKER_HOST ?? '';
  return host.startsWith('unix://') ? host.slice('unix://'.length) : DOCKER_SOCKET;
}

export interface Session {
  readonly location: Location;
  readonly config: Config;
  readonly dockerSocket: string;
  readonly store: Store;
  readonly ovs: Ovsdb;
}

/** Locates the settings and says the disagreements; no store opened (version, status's header). */
export async function located(ctx: CliContext, envFile: string | undefined): Promise<{ location: Location; dockerSocket: string }> {
  const dockerSocket = dockerSocketOf(ctx.env);
  const location = await locate(ctx.env, envFile ?? ENV_FILE, dockerSocket);
  for (const note of location.notes) ctx.err(`ovsnet: note: ${note}`);
  return { location, dockerSocket };
}

/** Runs `fn` with the store and OVSDB opened from the located settings, closing them after. */
export async function withSession<T>(ctx: CliContext, envFile: string | undefined, fn: (s: Session) => Promise<T>): Promise<T> {
  const { location, dockerSocket } = await located(ctx, envFile);
  if (location.storeProblem !== undefined) throw new OvsnetError('CONFIG_INVALID', location.storeProblem);
  const config = loadConfig(location.env);
  // The daemon's store, never a new one: a command run where no daemon ran says so, and makes nothing.
  const store = openStore(config.store, Math.min(config.storeTimeoutMs, 3000), { existing: true });
  const ovs = new Ovsdb(config.ovsdb, 2000);
  try {
    return await fn({ location, config, dockerSocket, store, ovs });
  } finally {
    ovs.close();
    await store.close();
  }
}
