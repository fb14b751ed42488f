/** Builds an Ipam on a given store, with a silent log and fixed host routes. */
import { loadConfig } from '../../src/config.js';
import { prefix, type Prefix } from '../../src/cidr.js';
import { Ipam } from '../../src/ipam-driver/ipam.js';
import { createLogger, type Logger } from '../../src/log.js';
import type { Store } from '../../src/store/types.js';

export function makeIpam(
  store: Store,
  opts: { host?: string; routes?: string[]; defaultPools?: string; log?: Logger; journal?: string; doubtConfirmMs?: number } = {},
): Ipam {
  const routes: Prefix[] = (opts.routes ?? []).map(prefix);
  const config = loadConfig(opts.defaultPools === undefined ? {} : { OVSNET_DEFAULT_POOLS: opts.defaultPools });
  return new Ipam({
    store,
    log: opts.log ?? createLogger('silent'),
    host: opts.host ?? 'test-host',
    defaultPools: config.defaultPools,
    hostRoutes: () => routes,
    readyTimeoutMs: 5000,
    ...(opts.journal === undefined ? {} : { journal: opts.journal }),
    ...(opts.doubtConfirmMs === undefined ? {} : { doubtConfirmMs: opts.doubtConfirmMs }),
  });
}

export const pool = (p: string, sub = '', v6 = false) => ({ addressSpace: 'LocalDefault', pool: p, subPool: sub, options: {}, v6 });
