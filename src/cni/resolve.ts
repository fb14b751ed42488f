/**
 * Which of this host's ovsnet networks a CNI configuration's `network` names. The driver's
 * records hold Docker's network IDs, not Docker's names, so a name is tried in this order: a
 * Docker network ID (or a unique prefix of 12 or more hex digits), a logical network name
 * (-o ovsnet.network=NAME, which this host's member network stands for), and last a Docker
 * network name, asked of the Docker daemon on this host (/var/run/docker.sock).
 */
import http from 'node:http';
import { OvsnetError } from '../lib/errors.js';
import type { NetworkRecord } from '../driver/model/records.js';

/** Docker's ID of the network named `name`; undefined when Docker has none or cannot be asked. */
export type DockerLookup = (name: string) => Promise<{ id: string } | { unreachable: string } | undefined>;

const DOCKER_SOCKET = '/var/run/docker.sock';
const DOCKER_TIMEOUT_MS = 3000;

/** Asks Docker's API (GET /networks/NAME) on the host's Docker socket. */
export const dockerLookup: DockerLookup = (name) =>
  new Promise((resolve) => {
    const req = http.get(
      { socketPath: DOCKER_SOCKET, path: `/networks/${encodeURIComponent(name)}`, timeout: DOCKER_TIMEOUT_MS },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => {
          if (res.statusCode !== 200) return resolve(undefined);
          try {
            const id = (JSON.parse(text) as { Id?: unknown }).Id;
            resolve(typeof id === 'string' ? { id } : undefined);
          } catch {
            resolve(undefined);
          }
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${DOCKER_TIMEOUT_MS} ms`)));
    req.on('error', (err) => resolve({ unreachable: `${DOCKER_SOCKET}: ${err.message}` }));
  });

/** The network `given` names among this host's networks, or NETWORK_NOT_FOUND listing them. */
export async function resolveNetwork(given: string, local: readonly NetworkRecord[], lookup: DockerLookup): Promise<NetworkRecord> {
  const byId = local.find((n) => n.networkId === given);
  if (byId !== undefined) return byId;
  const byLogical = local.find((n) => n.logical === given);
  if (byLogical !== undefined) return byLogical;
  if (/^[0-9a-f]{12,63}$/.test(given)) {
    const byPrefix = local.filter((n) => n.networkId.startsWith(given));
    if (byPrefix.length === 1 && byPrefix[0] !== undefined) return byPrefix[0];
  }
  const docker = await lookup(given);
  if (docker !== undefined && 'id' in docker) {
    const named = local.find((n) => n.networkId === docker.id);
    if (named !== undefined) return named;
  }
  const known = local.map((n) =>
    n.logical === undefined ? n.networkId.slice(0, 12) : `${n.networkId.slice(0, 12)} (logical ${n.logical})`,
  );
  const why =
    docker === undefined
      ? 'Docker has no network of that name'
      : 'id' in docker
        ? `Docker's network of that name (${docker.id.slice(0, 12)}) is not an ovsnet network of this host`
        : `Docker could not be asked for the name (${docker.unreachable})`;
  throw new OvsnetError(
    'NETWORK_NOT_FOUND',
    `the CNI configuration's network ${JSON.stringify(given)} is no ovsnet network of this host (${why}): give a Docker network name, a Docker network ID or a logical network name; this host has ${known.length === 0 ? 'none' : known.join(', ')}`,
  );
}
