/**
 * The QoS step of an endpoint: what applies to it (its own options over its network's,
 * model/qos-options.ts), put on its OVS port at Join and taken off at DeleteEndpoint, and brought
 * back with the bridge's other flows after ovs-vswitchd lost it (openflow-state.ts).
 */
import { OvsnetError } from '../../lib/errors.js';
import type { DriverDeps } from '../effects/deps.js';
import { effectiveQos, isSet, type Qos } from '../model/qos-options.js';
import type { EndpointRecord, NetworkRecord } from '../model/records.js';
import type { Undo } from '../model/undo.js';

export type EndpointQosDeps = Pick<DriverDeps, 'ovs' | 'qos' | 'log' | 'bridge'>;

/** Refuses QoS options where this ovsnet cannot enforce them (no QosApi given: tests, tools). */
export function requireQosSupport(deps: Pick<DriverDeps, 'qos'>, qos: Qos | undefined): void {
  if (isSet(qos) && deps.qos === undefined) {
    throw new OvsnetError(
      'NETWORK_OPTION_INVALID',
      'this ovsnet was built without QoS (no OpenFlow access): drop the ovsnet.bandwidth, ovsnet.burst and ovsnet.dscp options',
    );
  }
}

export class EndpointQos {
  constructor(private readonly deps: EndpointQosDeps) {}

  /** Join's step, after the port exists: the endpoint's meter and flows, their removal queued. */
  async apply(network: NetworkRecord, ep: EndpointRecord, undo: Undo[]): Promise<void> {
    const qos = effectiveQos(network.qos, ep.qos);
    const api = this.deps.qos;
    if (qos === undefined || api === undefined) return;
    // The port's OpenFlow number exists once ovs-vswitchd has applied the new port.
    await this.deps.ovs.waitApplied();
    const ofport = (await api.ofports(network.bridge)).get(ep.hostVeth);
    if (ofport === undefined)
      throw new OvsnetError('OVS_FAILED', `port ${ep.hostVeth} has no OpenFlow number on bridge ${network.bridge}: cannot apply its QoS`);
    undo.push(() => api.remove(network.bridge, ofport));
    await api.apply(network.bridge, ofport, qos);
    this.deps.log.info({ endpointId: ep.endpointId, ofport, qos }, 'QoS applied');
  }

  /** DeleteEndpoint's step, before the port goes (its OpenFlow number is read from it). Idempotent. */
  async remove(network: NetworkRecord | undefined, ep: EndpointRecord): Promise<void> {
    const api = this.deps.qos;
    if (api === undefined || effectiveQos(network?.qos, ep.qos) === undefined) return;
    const bridge = network?.bridge ?? this.deps.bridge;
    const ofport = (await api.ofports(bridge)).get(ep.hostVeth);
    if (ofport !== undefined) await api.remove(bridge, ofport);
  }
}
