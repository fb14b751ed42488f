/**
 * `ovsnet trace`'s inputs: DEST[:PORT][/proto] parsed strictly (a usage error otherwise, before
 * anything is read), and a container as Docker's Engine knows it (its ovsnet endpoints), read
 * with the name checked before it is put in a path and only the fields used, each checked.
 */
import { parseAddress } from '../../lib/cidr.js';
import { unixGet } from '../../lib/unix-http.js';
import { UsageError } from '../dispatch.js';

export type Proto = 'tcp' | 'udp' | 'icmp';

export interface Destination {
  readonly host: string;
  readonly port?: number;
  readonly proto: Proto;
}

export const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$/;
const DEST_FORM = 'DEST[:PORT][/tcp|udp|icmp]: DEST an IPv4 address, [IPv6], a container name or a service name; PORT 1-65535';

/** DEST[:PORT][/proto], checked. Pure. */
export function parseDestination(text: string): Destination {
  const bad = (why: string) => new UsageError(`${JSON.stringify(text.slice(0, 80))}: ${why}; expected ${DEST_FORM}`, 'trace');
  if (text.length > 300) throw bad('too long');
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:/[\]]+)|([0-9A-Fa-f:]+:[0-9A-Fa-f:.]*))(?::(\d{1,5}))?(?:\/(tcp|udp|icmp))?$/.exec(text);
  if (m === null) throw bad('not of the form');
  const host = m[1] ?? m[2] ?? m[3] ?? '';
  const isAddress = /^[\d.]+$/.test(host) || host.includes(':');
  if (isAddress) {
    try {
      parseAddress(host);
    } catch {
      throw bad(`${host} is not an address`);
    }
  } else if (!NAME.test(host)) throw bad(`${host} is not a name`);
  if (m[3] !== undefined && m[4] !== undefined) throw bad('an IPv6 address with a port is written [ADDRESS]:PORT');
  const port = m[4] === undefined ? undefined : Number(m[4]);
  if (port !== undefined && (port < 1 || port > 65535)) throw bad(`port ${port} is not 1-65535`);
  const proto: Proto = (m[5] as Proto | undefined) ?? (port === undefined ? 'icmp' : 'tcp');
  if (proto === 'icmp' && port !== undefined) throw bad('icmp has no port');
  if (proto !== 'icmp' && port === undefined) throw bad(`${proto} needs a port`);
  return { host, proto, ...(port === undefined ? {} : { port }) };
}

export interface DockerEndpoint {
  readonly networkId: string;
  /** Docker's name of the network, when it is one Docker allows (letters, digits, _ . -). */
  readonly network?: string;
  readonly endpointId: string;
  readonly ip: string;
  readonly ip6: string;
}

export interface DockerContainer {
  readonly id: string;
  readonly name: string;
  readonly endpoints: readonly DockerEndpoint[];
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const str = (v: unknown): string => (typeof v === 'string' && v.length <= 256 ? v : '');

/** A container as Docker's Engine knows it, or undefined; only the fields read, checked. */
export async function dockerContainer(socket: string, name: string): Promise<DockerContainer | undefined> {
  if (!NAME.test(name)) return undefined;
  const res = await unixGet(socket, `/containers/${encodeURIComponent(name)}/json`, 3000);
  if (res?.status !== 200) return undefined;
  let body: unknown;
  try {
    body = JSON.parse(res.body);
  } catch {
    return undefined;
  }
  if (!isObject(body) || !isObject(body.NetworkSettings) || !isObject(body.NetworkSettings.Networks)) return undefined;
  const endpoints = Object.entries(body.NetworkSettings.Networks).flatMap(([name, n]) =>
    isObject(n)
      ? [
          {
            networkId: str(n.NetworkID),
            ...(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/.test(name) ? { network: name } : {}),
            endpointId: str(n.EndpointID),
            ip: str(n.IPAddress),
            ip6: str(n.GlobalIPv6Address),
          },
        ]
      : [],
  );
  return { id: str(body.Id), name: str(body.Name).replace(/^\//, ''), endpoints };
}
