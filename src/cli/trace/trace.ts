/**
 * `ovsnet trace CONTAINER DEST[:PORT][/tcp|udp|icmp]`: why a packet goes where it goes. The
 * packet is the one CONTAINER would send (its OpenFlow port, its MAC and address; the
 * destination's MAC: a container's, a VIP's or the gateway's), put through the bridge by Open
 * vSwitch itself (`ofproto/trace` on ovs-vswitchd's control socket, each conntrack step resumed
 * as a new connection), and each flow it meets is said in words with the option it comes from
 * (explain.ts). When the first pass ends at the gateway of a network whose containers are
 * on this host (endpoint groups route through it), the packet is traced again from that
 * gateway, with what conntrack remembered of the first pass (its mark). A packet that leaves
 * through a tunnel is traced up to the tunnel: the peer's half is `ovsnet trace` on the peer.
 * It reads: nothing on the bridge, in the store or in Docker changes.
 */
import fs from 'node:fs';
import { containsAddress, parseAddress, parseCidr } from '../../lib/cidr.js';
import { OvsnetError } from '../../lib/errors.js';
import { hostNameOf } from '../../config/config.js';
import { macFor } from '../../driver/model/addresses.js';
import { parentName, type EndpointRecord, type NetworkRecord } from '../../driver/model/records.js';
import { remotePart } from '../../driver/groups/remote-family.js';
import { listEndpoints, listNetworks } from '../../driver/records/driver-records.js';
import { OpenFlow } from '../../driver/ovs/openflow.js';
import { QosFlows } from '../../driver/ovs/qos-flows.js';
import { Vswitchd } from '../../driver/ovs/vswitchd.js';
import { registeredHosts } from '../../cluster/hosts.js';
import { CT_NEXT } from '../../cluster/traces.js';
import { dockerContainer, type Destination, type DockerEndpoint, type Proto } from './destination.js';
import { outcomeOf, parseTrace, verdictOf, type BridgeTrace, type Outcome, type TraceStep } from './explain.js';
import type { Session } from '../session.js';
import { namesFrom } from './names.js';
import { peerPass } from './peer.js';

export interface TraceReport {
  readonly from: { readonly container: string; readonly network: string; readonly port: string; readonly address: string };
  readonly to: {
    readonly destination: string;
    readonly address: string;
    readonly mac: string;
    readonly proto: Proto;
    readonly port?: number;
  };
  /** Each pass through the bridge: the first from the container, a second from a gateway. */
  readonly passes: readonly {
    readonly from: string;
    readonly flow: string;
    readonly steps: readonly TraceStep[];
    readonly outcome: Outcome;
  }[];
  readonly verdict: string;
}

const addressOf = (cidr: string | undefined) => (cidr ?? '').split('/')[0] ?? '';

function inSubnets(address: string, pools: readonly { pool: string }[]): boolean {
  const a = parseAddress(address);
  return pools.some((p) => {
    const net = parseCidr(p.pool);
    return net.family === a.family && containsAddress(net, a.family, a.value);
  });
}

/** Docker's names of the container's networks, by NetworkID. */
const dockerNames = (endpoints: readonly DockerEndpoint[]) =>
  new Map(endpoints.flatMap((e) => (e.network === undefined ? [] : [[e.networkId, e.network] as const])));

/** The packet's protocol part: a ping, or a new TCP connection or UDP datagram to `port`. */
function l4Of(proto: Proto, six: boolean, port: number | undefined): string {
  if (proto === 'icmp') return six ? 'icmp6,icmp_type=128,icmp_code=0' : 'icmp,icmp_type=8,icmp_code=0';
  return `${proto}${six ? '6' : ''},tp_src=40000,tp_dst=${port ?? 0}${proto === 'tcp' ? ',tcp_flags=syn' : ''}`;
}

function flowOf(
  proto: Proto,
  six: boolean,
  f: { ofport: number; smac: string; dmac: string; src: string; dst: string; port?: number; mark?: string },
): string {
  const l3 = six ? `ipv6_src=${f.src},ipv6_dst=${f.dst}` : `nw_src=${f.src},nw_dst=${f.dst}`;
  return `${l4Of(proto, six, f.port)},${f.mark === undefined ? '' : `ct_mark=${f.mark},`}in_port=${f.ofport},dl_src=${f.smac},dl_dst=${f.dmac},${l3}`;
}

/** Traces a packet from `containerName` to `dest` (see the header). */
export async function trace(s: Session, containerName: string, dest: Destination): Promise<TraceReport> {
  const notFound = (why: string) => new OvsnetError('TRACE_TARGET_NOT_FOUND', why);
  const self = hostNameOf(s.config);
  const container = await dockerContainer(s.dockerSocket, containerName);
  if (container === undefined)
    throw notFound(`Docker (${s.dockerSocket}) knows no container ${JSON.stringify(containerName)}: give a name or ID docker ps shows`);
  const all = await listNetworks(s.store);
  const networks = all.filter((n) => n.host === undefined || n.host === self);
  const byId = new Map(networks.map((n) => [n.networkId, n]));
  const mine = container.endpoints.filter((e) => byId.has(e.networkId));
  if (mine.length === 0) throw notFound(`container ${container.name} is on no ovsnet network of this host (${self})`);
  const swarm = s.location.daemon?.info?.swarmVips?.networks ?? {};
  // The destination's address and the network the packet leaves on.
  let address = dest.host;
  let on: DockerEndpoint | undefined;
  if (!/^[\d.]+$/.test(dest.host) && !dest.host.includes(':')) {
    const other = await dockerContainer(s.dockerSocket, dest.host);
    const theirs = other?.endpoints.filter((o) => byId.has(o.networkId) && (o.ip !== '' || o.ip6 !== '')) ?? [];
    const ipOf = (o: DockerEndpoint) => (o.ip !== '' ? o.ip : o.ip6);
    // On a network of both; else in the subnet of one of the source's (endpoint groups share
    // their parent's); else wherever it is, reached through the gateway.
    const shared = mine.flatMap((e) => theirs.filter((o) => o.networkId === e.networkId).map((o) => ({ e, o })));
    const sameSubnet = mine.flatMap((e) => {
      const n = byId.get(e.networkId);
      return theirs.filter((o) => n !== undefined && inSubnets(ipOf(o), ipOf(o).includes(':') ? n.ipv6 : n.ipv4)).map((o) => ({ e, o }));
    });
    const pick =
      shared[0] ?? sameSubnet[0] ?? (theirs[0] === undefined || mine[0] === undefined ? undefined : { e: mine[0], o: theirs[0] });
    if (pick !== undefined) {
      on = pick.e;
      address = ipOf(pick.o);
    } else {
      for (const e of mine) {
        const vip = (Array.isArray(swarm[e.networkId]) ? swarm[e.networkId] : [])?.find((v) => v.service === dest.host)?.vip;
        if (vip !== undefined) {
          on = e;
          address = vip;
          break;
        }
      }
    }
    if (on === undefined) {
      throw notFound(
        `${dest.host} is no container on a network of ${container.name}'s and no swarm service there: give an address, a container name or a service name`,
      );
    }
  }
  const six = address.includes(':');
  on ??= mine.find((e) => inSubnets(address, (six ? byId.get(e.networkId)?.ipv6 : byId.get(e.networkId)?.ipv4) ?? [])) ?? mine[0];
  const network = on === undefined ? undefined : byId.get(on.networkId);
  if (on === undefined || network === undefined) throw notFound(`no ovsnet network of ${container.name} to trace on`);
  const endpoints = await listEndpoints(s.store);
  const ep = endpoints.find((e) => e.endpointId === on.endpointId);
  if (ep === undefined) throw notFound(`ovsnet has no record of ${container.name}'s endpoint ${on.endpointId.slice(0, 12)}`);
  const src = addressOf(six ? ep.addressV6 : ep.address);
  if (src === '') throw notFound(`${container.name} has no IPv${six ? 6 : 4} address on network ${network.networkId.slice(0, 12)}`);
  const ofports = await new QosFlows(new OpenFlow()).ofports(s.config.bridge);
  const ofport = ofports.get(ep.hostVeth);
  if (ofport === undefined) throw notFound(`port ${ep.hostVeth} of ${container.name} is not on bridge ${s.config.bridge}`);
  const inside = inSubnets(address, six ? network.ipv6 : network.ipv4);
  // An endpoint group's way out is its parent's gateway.
  const exit = (network.group === undefined ? undefined : byId.get(network.group.parent)) ?? network;
  // The MAC the container's ARP (or ND) gets: the destination's own on its network; the gateway's
  // for a destination outside the subnet, or of another endpoint group sharing it (the gateway
  // answers for those: proxy ARP); a VIP's own.
  const target = endpoints.find((e) => addressOf(e.address) === address || addressOf(e.addressV6) === address);
  // A logical parent's family on other hosts, as the daemon plans it (groups/remote-family.ts).
  const family = networks.filter((n) => n.networkId === exit.networkId || n.group?.parent === exit.networkId);
  const vteps = new Map(exit.logical === undefined ? [] : (await registeredHosts(s.store)).map((h) => [h.name, h.vtepIp]));
  const remote = remotePart({
    self,
    parent: exit,
    networks: all,
    endpointsOf: (id) => endpoints.filter((e) => e.networkId === id),
    localTags: new Map(family.map((n) => [n.group?.name ?? parentName(exit) ?? '', n.tag])),
    ofports,
    vtepOf: (host) => vteps.get(host),
  });
  const grouped = family.length > 1 || remote.groups;
  const local = target !== undefined && (target.host ?? self) === self;
  const viaGateway =
    !inside || (target !== undefined && target.networkId !== network.networkId && local) || (grouped && (!local || target === undefined));
  const dmac = viaGateway ? gatewayMac(exit) : macOfAddress(endpoints, address);
  const vswitchd = Vswitchd.besideOvsdb(s.config.ovsdb, 10_000);
  if (vswitchd === undefined)
    throw new OvsnetError(
      'OVS_UNAVAILABLE',
      `OVSNET_OVSDB is ${s.config.ovsdb}: ovs-vswitchd's control socket is on another machine; run ovsnet trace there`,
    );
  const shown = await vswitchd.command('dpif/show').catch(() => '');
  const names = {
    ...namesFrom(shown, s.config.bridge, networks, (p) => ofports.has(p), dockerNames(container.endpoints)),
    remoteGroup: (n: number) => remote.plan?.groups.get(n),
  };
  const run = async (flow: string): Promise<BridgeTrace> =>
    parseTrace(await vswitchd.command('ofproto/trace', [s.config.bridge, flow, ...CT_NEXT]), names);

  const first = flowOf(dest.proto, six, {
    ofport,
    smac: ep.mac,
    dmac,
    src,
    dst: address,
    ...(dest.port === undefined ? {} : { port: dest.port }),
  });
  let last = await run(first);
  let sent = { dl_src: ep.mac, dl_dst: dmac };
  const one = last;
  const passes: TraceReport['passes'][number][] = [
    { from: `port ${ep.hostVeth} of ${container.name}`, flow: first, steps: one.steps, outcome: outcomeOf(one, names) },
  ];
  // Routed by the host back into the bridge (endpoint groups): the second pass, from the destination network's gateway.
  const back = passes[0]?.outcome.kind === 'gateway' ? routedBack(networks, endpoints, address, six, self) : undefined;
  if (back !== undefined) {
    const gw = ofports.get(back.network.gatewayPort ?? '');
    if (gw !== undefined) {
      const mark = one.fields.reg6;
      sent = { dl_src: gatewayMac(back.network), dl_dst: back.endpoint.mac };
      const flow = flowOf(dest.proto, six, {
        ofport: gw,
        smac: sent.dl_src,
        dmac: sent.dl_dst,
        src,
        dst: address,
        ...(dest.port === undefined ? {} : { port: dest.port }),
        ...(mark === undefined ? {} : { mark }),
      });
      const two = await run(flow);
      last = two;
      passes.push({
        from: `the gateway ${back.network.gatewayPort ?? ''} (routed by the host)`,
        flow,
        steps: two.steps,
        outcome: outcomeOf(two, names),
      });
    }
  }
  // Out through a tunnel: the peer traces its half (its ovsnet, asked through the store).
  const out = passes.at(-1)?.outcome;
  let note: string | undefined;
  if (out?.kind === 'tunnel') {
    const peer = await peerPass({
      store: s.store,
      self,
      network: exit.vni === undefined ? network : exit,
      pass: last,
      sent,
      outcome: out,
      proto: dest.proto,
      six,
      src,
      dst: address,
      networks: all,
      l4: l4Of(dest.proto, six, dest.port),
    });
    if ('note' in peer) note = peer.note;
    else passes.push(peer);
  }
  return {
    from: { container: container.name, network: names.networkOfTag(network.tag), port: ep.hostVeth, address: src },
    to: { destination: dest.host, address, mac: dmac, proto: dest.proto, ...(dest.port === undefined ? {} : { port: dest.port }) },
    passes,
    verdict: verdictOf(passes, endpoints, exit, self, note),
  };
}

function macOfAddress(endpoints: readonly EndpointRecord[], address: string): string {
  const ep = endpoints.find((e) => addressOf(e.address) === address || addressOf(e.addressV6) === address);
  return ep?.mac ?? (address.includes(':') ? '02:00:00:00:00:00' : macFor(`${address}/32`));
}

function gatewayMac(n: NetworkRecord): string {
  try {
    return fs.readFileSync(`/sys/class/net/${n.gatewayPort ?? ''}/address`, 'utf8').trim();
  } catch {
    throw new OvsnetError(
      'TRACE_TARGET_NOT_FOUND',
      `network ${n.networkId.slice(0, 12)} has no gateway port on this host: a packet to the outside has nowhere to go`,
    );
  }
}

/** The local network and endpoint of `address` when the host routes to it through a gateway of its own bridge. */
function routedBack(
  networks: readonly NetworkRecord[],
  endpoints: readonly EndpointRecord[],
  address: string,
  six: boolean,
  self: string,
): { network: NetworkRecord; endpoint: EndpointRecord } | undefined {
  const endpoint = endpoints.find((e) => (e.host === undefined || e.host === self) && addressOf(six ? e.addressV6 : e.address) === address);
  const own = endpoint === undefined ? undefined : networks.find((n) => n.networkId === endpoint.networkId);
  // An endpoint group's gateway is its parent's.
  const network = own?.group === undefined ? own : networks.find((n) => n.networkId === own.group?.parent);
  return endpoint === undefined || network === undefined || network.gatewayPort === undefined ? undefined : { network, endpoint };
}
