/**
 * The resolvers Docker's embedded DNS server forwards to from a container's own network
 * namespace, so through the network's gateway: the nameservers of the host's resolv.conf that
 * are not loopback (Docker queries loopback ones from the host's namespace; IPv6 ones it writes
 * into the container's resolv.conf, which queries them itself); Google's public resolvers when
 * the file names none, as Docker does. Docker reads
 * /etc/resolv.conf, or /run/systemd/resolve/resolv.conf when the former names systemd-resolved's
 * stub 127.0.0.53 alone (libnetwork's resolvconf.Path); so does this. Egress rules always let
 * DNS to them pass (driver/network/egress-flows.ts). A managed plugin sees the host's
 * /etc/resolv.conf (Docker mounts it into plugins on the host's network) but not
 * /run/systemd/resolve: then the resolvers are unknown, and the caller says so.
 */
import { readFile } from 'node:fs/promises';
import { parseAddress } from '../lib/cidr.js';

export const RESOLV_CONF = '/etc/resolv.conf';
export const SYSTEMD_RESOLV_CONF = '/run/systemd/resolve/resolv.conf';
const STUB = '127.0.0.53';
/** What Docker uses when the host's resolv.conf names no nameserver (libnetwork's resolvconf defaults). */
export const DOCKER_DEFAULTS: readonly string[] = ['8.8.8.8', '8.8.4.4', '2001:4860:4860::8888', '2001:4860:4860::8844'];
/** More is not read: resolv.conf is a few lines, and glibc reads three nameservers. */
const MAX_BYTES = 64 * 1024;
const MAX_SERVERS = 16;

/** The host's resolvers as Docker forwards to them, or why they are not known. */
export type Resolvers = { readonly servers: readonly string[]; readonly from: string } | { readonly unknown: string };

/** The `nameserver` addresses of a resolv.conf text, in order (scoped IPv6 addresses and anything unparsable skipped). Pure. */
export function nameservers(text: string): string[] {
  const found: string[] = [];
  for (const line of text.slice(0, MAX_BYTES).split('\n')) {
    const address = /^\s*nameserver\s+(\S+)/.exec(line)?.[1];
    if (address === undefined || address.includes('%') || found.length >= MAX_SERVERS || found.includes(address)) continue;
    try {
      parseAddress(address);
      found.push(address);
    } catch {
      // not an address (a scoped fe80::1%eth0, garbage): Docker cannot use it from a container either
    }
  }
  return found;
}

const isLoopback = (address: string): boolean => {
  const a = parseAddress(address);
  return a.family === 4 ? a.value >> 24n === 127n : a.value === 1n;
};

/** Reads the files Docker reads. `read`: the file reader (tests give their own). */
export async function hostResolvers(
  read: (file: string) => Promise<string> = (file) => readFile(file, 'utf8'),
  files: { readonly main: string; readonly systemd: string } = { main: RESOLV_CONF, systemd: SYSTEMD_RESOLV_CONF },
): Promise<Resolvers> {
  let from = files.main;
  let servers: string[];
  try {
    servers = nameservers(await read(from));
    if (servers.length === 1 && servers[0] === STUB) {
      from = files.systemd;
      servers = nameservers(await read(from));
    }
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    return { unknown: `cannot read ${from} (${code}), where Docker finds the resolvers its embedded DNS server forwards to` };
  }
  // None listed at all: Docker's embedded server falls back to Google's public resolvers.
  if (servers.length === 0) return { servers: DOCKER_DEFAULTS, from: `${from} (no nameserver: Docker's defaults)` };
  return { servers: servers.filter((s) => !isLoopback(s)), from };
}
