/**
 * Join's side effects: the endpoint's veth pair (a spare renamed, or a new one), its host end an
 * OVS access port on the network's tag, marked with the endpoint's external_ids, the
 * endpoint's QoS rules, on an enable_icc=false network its port isolated (network/icc.ts), and
 * its network's egress and ingress rules with it (network/egress.ts), all before Docker hands the
 * container its interface. Each step queues its undo; a failure undoes them in reverse: no port
 * is left without its rules. Plugged, its addresses are announced (announce.ts), off Join's path.
 */
import type { DriverDeps } from '../effects/deps.js';
import type { EndpointQos } from '../qos/endpoint-qos.js';
import type { IccWiring } from '../network/icc.js';
import type { EgressWiring } from '../network/egress.js';
import { endpointIds } from '../ovs/external-ids.js';
import { names, type EndpointRecord, type NetworkRecord } from '../model/records.js';
import type { SpareVeths } from './spares.js';
import { undoAll, type Undo } from '../model/undo.js';

export async function plugEndpoint(
  deps: Pick<DriverDeps, 'links' | 'ovs' | 'datapath' | 'log' | 'announcer'>,
  spares: SpareVeths,
  rules: { readonly qos: EndpointQos; readonly icc: Pick<IccWiring, 'refresh'>; readonly egress: Pick<EgressWiring, 'refresh'> },
  network: NetworkRecord,
  ep: EndpointRecord,
): Promise<void> {
  const undo: Undo[] = [];
  try {
    await spares.createVeth({
      host: ep.hostVeth,
      container: ep.containerVeth,
      mtu: network.mtu,
      mac: ep.mac,
      replace: true, // a leftover of an earlier attempt (a crash between steps): it carries the alias
      txChecksumOff: deps.datapath() === 'netdev',
      alias: names.alias(ep.endpointId), // marks it ovsnet's: reconcile deletes no other link
    });
    undo.push(() => deps.links.deleteLink(ep.hostVeth));
    const externalIds = endpointIds(network.networkId, ep.endpointId);
    await deps.ovs.addPort(network.bridge, ep.hostVeth, { tag: network.tag, externalIds, replace: true });
    undo.push(() => deps.ovs.deletePort(ep.hostVeth, externalIds));
    await rules.qos.apply(network, ep, undo);
    await rules.icc.refresh(network);
    await rules.egress.refresh(network);
    deps.announcer?.announce(ep);
  } catch (err) {
    await undoAll(undo, deps.log, 'join', ep.endpointId);
    throw err;
  }
}
