/**
 * Host ports of published container ports, held the way Docker's bridge driver holds them with
 * its docker-proxy: ovsnet binds a socket on HostIP:HostPort for every published port. The bind
 * finds a port in use (EADDRINUSE: another container's, or a host process's, whichever bound it
 * first), and holds it against later host processes. The DNAT rules (nat-rules.ts) leave
 * 127.0.0.0/8 and ::1 alone, so the host's own connections to 127.0.0.1:PORT or [::1]:PORT reach
 * this socket, which relays them to the container (loopback-proxy.ts); everything else is
 * DNATed before it. An IPv6 host address (`-p [::]:8080:80`) is published to the container's
 * IPv6 address, its socket IPv6 only ([::] holds IPv6's port, not IPv4's).
 *
 * Sockets live as long as the process: after a restart, reclaim() binds the recorded ports again.
 */
import fs from 'node:fs';
import { OvsnetError } from '../../lib/errors.js';
import type { Logger } from '../../lib/log.js';
import { listenTcp, listenUdp, type Held } from './loopback-proxy.js';
import { isWildcard } from './nat-rules.js';
import type { PortBinding } from '../model/records.js';

/** Where `-p 80` (HostPort 0) picks its port: the kernel's ephemeral range, as Docker does. */
export function dynamicRange(file = '/proc/sys/net/ipv4/ip_local_port_range'): readonly [number, number] {
  try {
    const [lo, hi] = fs.readFileSync(file, 'utf8').trim().split(/\s+/).map(Number);
    if (lo !== undefined && hi !== undefined && Number.isInteger(lo) && Number.isInteger(hi) && lo >= 1 && hi <= 65535 && lo <= hi)
      return [lo, hi];
  } catch {
    // not Linux, or no /proc: Docker's own default below
  }
  return [49153, 60999];
}

/** Where published traffic goes: the container's IPv4 address, or its IPv6 one for an IPv6 host address. */
export interface Target {
  readonly endpointId: string;
  readonly address?: string;
  readonly addressV6?: string;
}

export class HostPorts {
  /** Bound sockets by endpoint, one per published port. */
  private readonly held = new Map<string, Held[]>();
  private next: number;

  constructor(
    private readonly log: Logger,
    private readonly dynamic: readonly [number, number] = dynamicRange(),
  ) {
    this.next = dynamic[0];
  }

  /**
   * Binds one host port per binding: HostPort itself, the first free port of HostPort-HostPortEnd,
   * or for HostPort 0 the next free port of the dynamic range. Answers the bindings as published
   * (HostPort = HostPortEnd = the port taken). Idempotent for an endpoint that holds ports already
   * (answers them); on failure releases what it bound. Who claims releases (release()).
   */
  async claim(target: Target, wanted: readonly PortBinding[]): Promise<PortBinding[]> {
    const mine = this.held.get(target.endpointId);
    if (mine !== undefined) return mine.map((h) => h.binding);
    const taken: Held[] = [];
    try {
      for (const b of wanted) taken.push(await this.bindOne(target, b));
    } catch (err) {
      for (const h of taken) await h.close();
      throw err;
    }
    this.held.set(target.endpointId, taken);
    return taken.map((h) => h.binding);
  }

  /** Closes the endpoint's sockets (its host ports are free again). Idempotent. */
  async release(endpointId: string): Promise<void> {
    const mine = this.held.get(endpointId);
    this.held.delete(endpointId);
    for (const h of mine ?? []) await h.close();
  }

  private async bindOne(target: Target, b: PortBinding): Promise<Held> {
    refuseUnsupported(b);
    const host = b.hostIp === '' ? '0.0.0.0' : b.hostIp;
    const to = host.includes(':') ? target.addressV6 : target.address;
    if (to === undefined) throw noAddress(b, host);
    const dynamic = b.hostPort === 0;
    const [lo, hi] = dynamic ? this.dynamic : [b.hostPort, b.hostPortEnd];
    const count = hi - lo + 1;
    const first = dynamic ? this.next : lo;
    let lastHolder = '';
    for (let i = 0; i < count; i++) {
      const port = lo + ((first - lo + i) % count);
      const binding: PortBinding = { ...b, hostPort: port, hostPortEnd: port };
      const holder = this.holderOf(b.proto, host, port);
      if (holder !== undefined) {
        lastHolder = holder;
        continue;
      }
      const listen = b.proto === 'tcp' ? listenTcp : listenUdp;
      const got = await listen(binding, host, to, this.log);
      if (got === 'in use') {
        lastHolder = 'a process of this host';
        continue;
      }
      if (dynamic) this.next = port + 1 > hi ? lo : port + 1;
      return got;
    }
    const what = `${b.proto} port ${count === 1 ? String(lo) : `${lo}-${hi}`} on ${host}`;
    if (count === 1) {
      throw new OvsnetError(
        'PORT_IN_USE',
        `host ${what} is in use by ${lastHolder}: publish another port (-p OTHER:${b.containerPort}), a range (-p ${lo}-${Math.min(lo + 10, 65535)}:${b.containerPort}) or any free one (-p ${b.containerPort})`,
      );
    }
    throw new OvsnetError(
      'PORT_IN_USE',
      `every host ${what} is in use (the last by ${lastHolder}): publish a wider range, or any free port (-p ${b.containerPort})`,
    );
  }

  /** Which endpoint of ovsnet holds this port already (a clearer reason than EADDRINUSE). */
  private holderOf(proto: string, host: string, port: number): string | undefined {
    for (const [ep, list] of this.held) {
      for (const h of list) {
        const other = h.binding.hostIp === '' ? '0.0.0.0' : h.binding.hostIp;
        const overlap = other.includes(':') === host.includes(':') && (other === host || isWildcard(other) || isWildcard(host));
        if (h.binding.proto === proto && h.binding.hostPort === port && overlap) return `the ovsnet endpoint ${ep.slice(0, 12)}`;
      }
    }
    return undefined;
  }
}

/** What ovsnet cannot hold a socket for, refused with the way out. */
function refuseUnsupported(b: PortBinding): void {
  if (b.proto === 'sctp') {
    throw new OvsnetError(
      'PORT_UNSUPPORTED',
      `cannot publish sctp port ${b.containerPort}: ovsnet publishes tcp and udp ports only; publish it on a network of Docker's bridge driver`,
    );
  }
}

/** A binding of a family the endpoint has no address of. */
function noAddress(b: PortBinding, host: string): OvsnetError {
  const v6 = host.includes(':');
  return new OvsnetError(
    'PORT_UNSUPPORTED',
    v6
      ? `cannot publish port ${b.containerPort} on the IPv6 host address ${host}: the container has no IPv6 address on this network; give the network an IPv6 subnet (--ipv6 --subnet fd00:1::/64) or publish on an IPv4 host address (-p ${b.hostPort}:${b.containerPort})`
      : `cannot publish port ${b.containerPort} on the IPv4 host address ${host}: the container has no IPv4 address on this network; publish on an IPv6 host address (-p [::]:${b.hostPort}:${b.containerPort})`,
  );
}
