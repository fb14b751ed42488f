/**
 * The CNI front end as the daemon holds it: the service (service.ts) over the daemon's own
 * driver and IPAM, and its server (server.ts), which daemon.ts listens with on OVSNET_CNI_SOCKET.
 */
import type { FastifyInstance } from 'fastify';
import type { Run } from '../lib/exec.js';
import { ipNetns, iproute2 } from './netns.js';
import { dockerLookup } from './resolve.js';
import { buildCniServer } from './server.js';
import { CniService, type CniDeps } from './service.js';

export interface CniFrontEnd {
  readonly socket: string;
  readonly service: CniService;
  readonly app: FastifyInstance;
}

/** `run`: how the namespace's `ip` commands run (the daemon's measured spawner); exec without. */
export function cniFrontEnd(socket: string, deps: Omit<CniDeps, 'netns' | 'dockerLookup'> & { readonly run?: Run }): CniFrontEnd {
  const service = new CniService({ ...deps, netns: deps.run === undefined ? iproute2 : ipNetns(deps.run), dockerLookup });
  return { socket, service, app: buildCniServer(service, deps.log) };
}
