/**
 * Publishing an endpoint's ports (ProgramExternalConnectivity): one free host port per binding,
 * held by ovsnet (host-ports.ts) and DNATed to the container (nat.ts); the ports taken recorded,
 * so that EndpointOperInfo answers them under `com.docker.network.portmap` in the form of
 * Docker's types.PortBinding (as the bridge driver does), and a restart holds them again.
 * Note: dockerd reads that value only when it is its own Go type, which a remote driver's JSON
 * never is, so `docker port` cannot show it (docs/docker-plugin-protocol.md).
 */
import { messageOf } from '../../lib/errors.js';
import type { DriverDeps } from '../effects/deps.js';
import type { DriverRecords } from '../records/driver-records.js';
import type { EndpointRecord, PortBinding } from '../model/records.js';

export const PORTMAP_LABEL = 'com.docker.network.portmap';

const PROTO_NUMBER = { tcp: 6, udp: 17, sctp: 132 } as const;

export interface DockerPortBinding {
  Proto: number;
  IP: string;
  Port: number;
  HostIP: string;
  HostPort: number;
  HostPortEnd: number;
}

/** The container's address a binding goes to: its IPv6 one for an IPv6 host address. */
function targetOf(ep: Pick<EndpointRecord, 'address' | 'addressV6'>, b: PortBinding): string | undefined {
  return plain(b.hostIp.includes(':') ? ep.addressV6 : ep.address);
}

/** An address without its prefix length; undefined for none (Docker sends '' for "no address"). */
function plain(cidr: string | undefined): string | undefined {
  const a = cidr?.split('/')[0];
  return a === '' ? undefined : a;
}

export function dockerPortmap(published: readonly PortBinding[], ep: Pick<EndpointRecord, 'address' | 'addressV6'>): DockerPortBinding[] {
  return published.map((b) => ({
    Proto: PROTO_NUMBER[b.proto],
    IP: targetOf(ep, b) ?? '',
    Port: b.containerPort,
    HostIP: b.hostIp === '' ? '0.0.0.0' : b.hostIp,
    HostPort: b.hostPort,
    HostPortEnd: b.hostPortEnd,
  }));
}

/** EndpointOperInfo's part: the published ports under Docker's label, when there are some. */
export function portmapInfo(ep: EndpointRecord): Record<string, DockerPortBinding[]> {
  return ep.published === undefined ? {} : { [PORTMAP_LABEL]: dockerPortmap(ep.published, ep) };
}

function sameBindings(a: readonly PortBinding[], b: readonly PortBinding[]): boolean {
  const key = (l: readonly PortBinding[]) =>
    l.map((p) => `${p.proto}/${p.containerPort}/${p.hostIp}/${p.hostPort}/${p.hostPortEnd}`).join(',');
  return key(a) === key(b);
}

type Records = Pick<DriverRecords, 'updateEndpoint' | 'localNetworks' | 'allEndpoints'>;

export class Publisher {
  constructor(
    private readonly deps: Pick<DriverDeps, 'nat' | 'hostPorts' | 'log'>,
    private readonly records: Records,
  ) {}

  /**
   * Publishes `portmap` (Docker's, or else the one CreateEndpoint recorded). Again for the same
   * bindings: the same ports. On failure nothing stays held or programmed.
   */
  async program(ep: EndpointRecord, portmap: readonly PortBinding[]): Promise<void> {
    const wanted = portmap.length > 0 ? portmap : ep.portmap;
    if (wanted.length === 0) return;
    const again = ep.published !== undefined && sameBindings(ep.portmap, wanted);
    // -p without a host address: the network's host_binding_ipv4, as Docker's bridge driver does.
    const binding = again ? undefined : (await this.records.localNetworks()).find((n) => n.networkId === ep.networkId)?.hostBinding;
    const ask = binding === undefined ? wanted : wanted.map((b) => (b.hostIp === '' ? { ...b, hostIp: binding } : b));
    const published = await this.publish(ep, again ? (ep.published ?? wanted) : ask);
    if (!sameBindings(ep.portmap, wanted) || !sameBindings(ep.published ?? [], published)) {
      await this.records.updateEndpoint({ ...ep, portmap: wanted, published });
    }
    this.deps.log.info({ endpointId: ep.endpointId, published }, 'ports published');
  }

  /** Takes the endpoint's ports back: rules, host ports, record. Idempotent. */
  async revoke(ep: EndpointRecord): Promise<void> {
    // An endpoint that asked for no port and holds none has no rule: Leave and DeleteEndpoint of
    // most containers must not pay for reading the nat table (a process, ~5 ms).
    if (ep.portmap.length === 0 && ep.published === undefined) return;
    await this.deps.nat.removePorts(ep.endpointId);
    await this.deps.hostPorts.release(ep.endpointId);
    if (ep.published !== undefined) {
      const { published: _published, ...rest } = ep;
      await this.records.updateEndpoint(rest);
    }
  }

  /**
   * After a restart: holds the recorded ports of this host's endpoints again (their rules
   * stayed), and removes the rules of endpoints that went while ovsnet was down.
   */
  async republish(): Promise<void> {
    const local = new Set((await this.records.localNetworks()).map((n) => n.networkId));
    const endpoints = await this.records.allEndpoints();
    const pruned = await this.deps.nat.prunePorts(new Set(endpoints.map((e) => e.endpointId.slice(0, 12)))).catch((err: unknown) => {
      this.deps.log.warn({ err }, `cannot remove the port rules of removed endpoints: ${messageOf(err)}`);
      return [];
    });
    if (pruned.length > 0) this.deps.log.info({ endpoints: pruned }, 'removed the port rules of endpoints that no longer exist');
    for (const ep of endpoints) {
      if (ep.published === undefined || !local.has(ep.networkId)) continue;
      await this.publish(ep, ep.published).catch((err: unknown) =>
        this.deps.log.warn({ err }, `cannot publish the ports of endpoint ${ep.endpointId.slice(0, 12)} again: ${messageOf(err)}`),
      );
    }
  }

  /**
   * Holds host ports for `ask` and DNATs them to the endpoint (IPv4 host addresses to its IPv4
   * address, IPv6 ones to its IPv6 address: a family it has no address of is refused by
   * host-ports.ts); undoes both on failure.
   */
  private async publish(ep: EndpointRecord, ask: readonly PortBinding[]): Promise<PortBinding[]> {
    const [v4, v6] = [plain(ep.address), plain(ep.addressV6)];
    const target = {
      endpointId: ep.endpointId,
      ...(v4 === undefined ? {} : { address: v4 }),
      ...(v6 === undefined ? {} : { addressV6: v6 }),
    };
    const published = await this.deps.hostPorts.claim(target, ask);
    try {
      for (const address of [v4, v6]) {
        const mine = published.filter((b) => address !== undefined && targetOf(ep, b) === address);
        if (address !== undefined && mine.length > 0) await this.deps.nat.addPorts(ep.endpointId, address, mine);
      }
    } catch (err) {
      await this.deps.nat.removePorts(ep.endpointId).catch(() => undefined);
      await this.deps.hostPorts.release(ep.endpointId);
      throw err;
    }
    return published;
  }
}
