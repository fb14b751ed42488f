/**
 * Who holds a reservation: its holder key, one string per holder, kept in the reservation record
 * (`holder`) so that allocation by key is idempotent, release by a non-holder changes nothing,
 * and a reservation whose holder is gone can be found and reaped (orphan-reaper.ts). The forms
 * (`cni/<containerID>/<ifname>`, `docker/name/<host>/<name>`, `docker/endpoint/<endpointID>`
 * once bind-endpoint.ts bound it, `docker/request/<host>/<token>`, `host/<name>`,
 * `docker/gateway`, `adopted/docker/<containerID>`) and how a front end of its own (CNI) uses
 * them are in docs/ipam.md, "Holders, reaping and adopting". A record written before holders
 * were kept (no `holder`) reads as its endpoint once bound, else as its request (holderOf).
 */
import type { Reservation } from './records.js';

/** `--ipam-opt ovsnet.sticky=true`: a holder key gets back the address it held last while it is free. */
export const STICKY = 'ovsnet.sticky';

export const holders = {
  cni: (containerId: string, ifname: string) => `cni/${containerId}/${ifname}`,
  dockerName: (host: string, name: string) => `docker/name/${host}/${name}`,
  dockerEndpoint: (endpointId: string) => `docker/endpoint/${endpointId}`,
  dockerRequest: (host: string, token: string) => `docker/request/${host}/${token}`,
  dockerGateway: 'docker/gateway',
  adoptedDocker: (containerId: string) => `adopted/docker/${containerId}`,
  hostPort: (name: string) => `host/${name}`,
} as const;

/** The CNI attachment a holder key names, if it is one. */
export function cniOf(holder: string): { containerId: string; ifname: string } | undefined {
  const m = /^cni\/([^/]+)\/([^/]+)$/.exec(holder);
  return m === null ? undefined : { containerId: m[1] ?? '', ifname: m[2] ?? '' };
}

/** Holders a Docker ReleaseAddress may release: Docker's own (every key but a CNI attachment's). */
export function releasableByDocker(holder: string): boolean {
  return !holder.startsWith('cni/');
}

/**
 * The holder of a reservation: a CNI attachment's key (its CNI endpoint, bound in CreateEndpoint,
 * goes with the attachment), else its endpoint once bound, else the key it was made for.
 */
export function holderOf(r: Reservation): string {
  if (r.holder?.startsWith('cni/') === true) return r.holder;
  if (r.endpoint !== undefined) return holders.dockerEndpoint(r.endpoint);
  if (r.holder !== undefined) return r.holder;
  if (r.kind === 'gateway') return holders.dockerGateway;
  return r.name === undefined ? holders.dockerRequest(r.host, r.token ?? r.reservedAt) : holders.dockerName(r.host, r.name);
}

/**
 * The key a released reservation is remembered under in a sticky pool (`--ipam-opt
 * ovsnet.sticky=true`): a Docker container's name (a container recreated with that name asks
 * with it again), else its holder key. Undefined when nothing would ask with it again.
 */
export function stickyKeyOf(r: Reservation): string | undefined {
  if (r.kind === 'gateway') return undefined;
  const holder = holderOf(r);
  if (holder.startsWith('docker/')) return r.name === undefined ? undefined : holders.dockerName(r.host, r.name);
  return holder;
}

/** Whether a holder key is looked up again by allocation (idempotent): named and not yet bound. */
export function isKeyed(holder: string): boolean {
  return !holder.startsWith('docker/request/') && holder !== holders.dockerGateway && !holder.startsWith('docker/endpoint/');
}
