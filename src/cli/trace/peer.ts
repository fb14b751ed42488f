/**
 * ovsnet trace's pass on a peer's bridge: when this host's pass ends in a VXLAN tunnel, the
 * packet as it left (its MACs from ofproto/trace's final flow, its addresses and ports, the
 * tunnel's VNI and ends) is traced on the peer by the peer's ovsnet (src/cluster/traces.ts), as
 * arriving from its tunnel to this host, and said in words with the peer's names.
 */
import { registeredHosts } from '../../cluster/hosts.js';
import { tracePeer } from '../../cluster/traces.js';
import { messageOf } from '../../lib/errors.js';
import type { NetworkRecord } from '../../driver/model/records.js';
import { tunnelName } from '../../driver/vxlan/tunnels.js';
import type { Store } from '../../store/types.js';
import { outcomeOf, parseTrace, type BridgeTrace, type Outcome, type TraceStep } from './explain.js';
import type { Proto } from './destination.js';
import { namesFrom } from './names.js';

export interface PeerPass {
  readonly from: string;
  readonly flow: string;
  readonly steps: readonly TraceStep[];
  readonly outcome: Outcome;
}

export interface PeerRequest {
  readonly store: Store;
  readonly self: string;
  /** The logical network the packet travels on (its VNI). */
  readonly network: NetworkRecord;
  /** This host's last pass, ending in the tunnel, and its outcome. */
  readonly pass: BridgeTrace;
  /** The MACs the last pass's packet was sent into the bridge with. */
  readonly sent: { readonly dl_src: string; readonly dl_dst: string };
  readonly outcome: Outcome;
  readonly proto: Proto;
  readonly six: boolean;
  readonly src: string;
  readonly dst: string;
  readonly port?: number;
  /** Every host's network records (the peer's name its tags). */
  readonly networks: readonly NetworkRecord[];
  /** l4 part of the flow, as this host's pass had it (flowOf's). */
  readonly l4: string;
}

/** The peer's pass; or, when there is none, why (said in the verdict). */
export async function peerPass(r: PeerRequest): Promise<PeerPass | { readonly note: string }> {
  const hosts = await registeredHosts(r.store);
  const peer = hosts.find((h) => h.vtepIp === r.outcome.remote);
  const me = hosts.find((h) => h.name === r.self);
  // ofproto/trace prints "Final flow: unchanged" when no flow rewrote the packet: it left as sent.
  const smac = r.pass.leaving.dl_src ?? r.sent.dl_src;
  const dmac = r.pass.leaving.dl_dst ?? r.sent.dl_dst;
  // The port the packet comes in by on the peer: its tunnel to this host, named by this host's address.
  const inPort = r.network.vni === undefined || me === undefined ? undefined : tunnelName(r.network.vni, me.vtepIp);
  if (
    peer === undefined ||
    me === undefined ||
    r.network.vni === undefined ||
    inPort === undefined ||
    smac === undefined ||
    dmac === undefined
  )
    return { note: `the rest of its way is the peer's (${r.outcome.remote ?? 'unknown'}): ovsnet trace there` };
  const l3 = r.six ? `ipv6_src=${r.src},ipv6_dst=${r.dst}` : `nw_src=${r.src},nw_dst=${r.dst}`;
  const flow = `${r.l4},in_port=${inPort},tun_id=${r.network.vni},tun_src=${me.vtepIp},tun_dst=${peer.vtepIp},dl_src=${smac},dl_dst=${dmac},${l3}`;
  try {
    const answer = await tracePeer(r.store, peer.name, r.self, flow);
    const names = namesFrom(
      answer.ports,
      answer.bridge,
      r.networks.filter((n) => n.host === peer.name),
      () => true,
    );
    const traced = parseTrace(answer.trace, names);
    return { from: `the tunnel from ${r.self}, on host ${peer.name}`, flow, steps: traced.steps, outcome: outcomeOf(traced, names) };
  } catch (err) {
    return { note: `host ${peer.name} did not trace its half (${messageOf(err)})` };
  }
}
