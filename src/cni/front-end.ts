/**
 * The CNI front end as the daemon holds it: the service (service.ts) over the daemon's own
 * driver and IPAM, and its server (server.ts), which daemon.ts listens with on OVSNET_CNI_SOCKET.
 */
import type { FastifyInstance } from 'fastify';
import { iproute2 } from './netns.js';
import { dockerLookup } from './resolve.js';
import { buildCniServer } from './server.js';
import { CniService, type CniDeps } from './service.js';

export interface CniFrontEnd {
  readonly socket: string;
  readonly service: CniService;
  readonly app: FastifyInstance;
}

export function cniFrontEnd(socket: string, deps: Omit<CniDeps, 'netns' | 'dockerLookup'>): CniFrontEnd {
  const service = new CniService({ ...deps, netns: iproute2, dockerLookup });
  return { socket, service, app: buildCniServer(service, deps.log) };
}
