/** Builds an Ipam on a given store, with a silent log and fixed host routes. */
import { loadConfig } from '../../src/config/config.js';
import { prefix } from '../../src/lib/cidr.js';
import type { HostNet } from '../../src/lib/subnets.js';
import { Ipam } from '../../src/ipam-driver/ipam.js';
import { createLogger, type Logger } from '../../src/lib/log.js';
import type { Store } from '../../src/store/types.js';
import type { EndpointExists } from '../../src/ipam-driver/allocation/release-guard.js';

export function makeIpam(
  store: Store,
  opts: {
    host?: string;
    /** Routes via a next hop: dynamic pools avoid them, an explicit --subnet may shadow them. */
    routes?: string[];
    /** The host's own segments ("10.0.0.0/24 eth0" a connected route, "10.0.0.5/32 eth0" an address). */
    connected?: string[];
    defaultPools?: string;
    minPrefix?: string;
    log?: Logger;
    journal?: string;
    doubtConfirmMs?: number;
    /** The driver's records' answer (daemon/assemble.ts wires it so): Docker's release keeps an address bound to a recorded endpoint. */
    endpointExists?: EndpointExists;
  } = {},
): Ipam {
  const nets: HostNet[] = [
    ...(opts.routes ?? []).map((r) => ({ prefix: prefix(r), dev: 'eth0', kind: 'route' as const })),
    ...(opts.connected ?? []).map((c) => {
      const [cidr = '', dev = 'eth0'] = c.split(' ');
      const p = prefix(cidr);
      return { prefix: p, dev, kind: p.bits === (p.family === 4 ? 32 : 128) ? ('address' as const) : ('connected route' as const) };
    }),
  ];
  const config = loadConfig({
    ...(opts.defaultPools === undefined ? {} : { OVSNET_DEFAULT_POOLS: opts.defaultPools }),
    ...(opts.minPrefix === undefined ? {} : { OVSNET_MIN_PREFIX: opts.minPrefix }),
  });
  return new Ipam({
    store,
    log: opts.log ?? createLogger('silent'),
    host: opts.host ?? 'test-host',
    defaultPools: config.defaultPools,
    hostNets: () => nets,
    minPrefix: config.minPrefix,
    readyTimeoutMs: 5000,
    ...(opts.journal === undefined ? {} : { journal: opts.journal }),
    ...(opts.doubtConfirmMs === undefined ? {} : { doubtConfirmMs: opts.doubtConfirmMs }),
    ...(opts.endpointExists === undefined ? {} : { endpointExists: opts.endpointExists }),
  });
}

export const pool = (p: string, sub = '', v6 = false) => ({ addressSpace: 'LocalDefault', pool: p, subPool: sub, options: {}, v6 });
