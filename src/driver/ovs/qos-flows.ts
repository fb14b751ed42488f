/**
 * An endpoint's QoS on the bridge: an OpenFlow 1.3 meter (a drop band at the
 * rate, with its burst) on traffic the container sends, and DSCP marking of its IPv4 and IPv6
 * packets, by flows matching the endpoint's OpenFlow port. Meters work on both datapaths (the
 * userspace one since OVS 2.7, the kernel one since OVS 2.10 with Linux 4.15), unlike ingress
 * policing, which the userspace datapath does not do. The meter ID is METER_BASE + the port's
 * OpenFlow number, unique on the bridge and apart from other controllers' meters; the flows
 * carry a cookie of their own (cookies.ts: QoS + that number) so that they are found again.
 * ovs-vswitchd keeps neither meters nor flows across a restart: they come back with the rest of
 * the bridge's OpenFlow state (openflow-state.ts).
 *
 * ovs-ofctl is run here only for endpoints that have QoS, on their Join and DeleteEndpoint.
 */
import { FEATURE, cookieOf, hex } from './cookies.js';
import { OpenFlow, type OfctlCall } from './openflow.js';
import { MAX_OFPORT } from './ovsdb-rows.js';
import type { Qos } from '../model/qos-options.js';

const OF13: OfctlCall = { of13: true };
/** Above NORMAL (0) and the gateway guard (100), which matches tunnel traffic only. */
const PRIORITY = 300;

export const qosCookie = (ofport: number): string => hex(cookieOf(FEATURE.qos, ofport));

/**
 * ovsnet's meter ids: METER_BASE + the port's OpenFlow number (1 to 0xfeff, OFPP_MAX excluded),
 * so 0x0f5d0001-0x0f5dfeff. Meters outside that range are another controller's: never touched.
 */
export const METER_BASE = 0x0f5d0000;
export const meterId = (ofport: number): number => METER_BASE + ofport;
/** The OpenFlow port of one of ovsnet's meter ids; undefined for any other id. Pure. */
export function meterPort(id: number): number | undefined {
  const port = id - METER_BASE;
  return Number.isInteger(port) && port >= 1 && port <= MAX_OFPORT ? port : undefined;
}

/** The meter of an endpoint on port `ofport`, as add-meter takes it; undefined without a rate. Pure. */
export function meterSpec(ofport: number, qos: Qos): string | undefined {
  if (qos.rateKbps === undefined) return undefined;
  return `meter=${meterId(ofport)},kbps,burst,stats,bands=type=drop,rate=${qos.rateKbps},burst_size=${qos.burstKbit ?? qos.rateKbps}`;
}

/** The flows of an endpoint on port `ofport`: meter and mark its IP packets, meter the rest. Pure. */
export function qosFlows(ofport: number, qos: Qos): string[] {
  const head = `cookie=${qosCookie(ofport)},priority=${PRIORITY},in_port=${ofport}`;
  const meter = qos.rateKbps === undefined ? '' : `meter:${meterId(ofport)},`;
  if (qos.dscp === undefined) return [`${head},actions=${meter}NORMAL`];
  const mark = `${meter}set_field:${qos.dscp}->ip_dscp,NORMAL`;
  return [
    `${head},ip,actions=${mark}`,
    `${head},ipv6,actions=${mark}`,
    ...(meter === '' ? [] : [`cookie=${qosCookie(ofport)},priority=${PRIORITY - 1},in_port=${ofport},actions=${meter}NORMAL`]),
  ];
}

export class QosFlows {
  /**
   * `ports`: the bridge's port numbers from OVSDB (Ovsdb.bridgeOfports), one transaction on a
   * connection already open; without it, an `ovs-ofctl dump-ports-desc` process (the CLI's way).
   */
  constructor(
    private readonly of: OpenFlow = new OpenFlow(),
    private readonly ports?: (bridge: string) => Promise<Map<string, number>>,
  ) {}

  /** The OpenFlow number of every port of the bridge, by name. A read. */
  async ofports(bridge: string): Promise<Map<string, number>> {
    if (this.ports !== undefined) return this.ports(bridge);
    const out = await this.of.ofctl(['dump-ports-desc', bridge], OF13);
    return new Map([...out.matchAll(/^\s*(\d+)\(([^)]+)\):/gm)].map((m) => [m[2] ?? '', Number(m[1])]));
  }

  /**
   * Installs the meter and flows of the endpoint on `ofport`, replacing any it had (a changed
   * rate is modified in place). Idempotent; remove() undoes it.
   */
  async apply(bridge: string, ofport: number, qos: Qos): Promise<void> {
    const meter = meterSpec(ofport, qos);
    if (meter !== undefined) {
      // Not repeated on its own: a second add-meter would answer METER_EXISTS for the first one.
      const addMeter = { ...OF13, repeatable: false };
      const added = await this.of.answer(['add-meter', bridge, meter], addMeter);
      if (added.code !== 0) {
        if (!/METER_EXISTS|exists/i.test(added.stderr)) throw this.of.error(['add-meter', bridge, meter], added, addMeter);
        await this.ofctl(['mod-meter', bridge, meter]);
      }
    }
    // Flows of an earlier QoS of this port (dscp dropped, say) go first; add-flow replaces the same match.
    await this.ofctl(['del-flows', bridge, `cookie=${qosCookie(ofport)}/-1`]);
    for (const flow of qosFlows(ofport, qos)) await this.ofctl(['add-flow', bridge, flow]);
    if (meter === undefined) await this.deleteMeter(bridge, ofport);
  }

  /** Removes the endpoint's flows and meter. Idempotent: none left is done. */
  async remove(bridge: string, ofport: number): Promise<void> {
    await this.ofctl(['del-flows', bridge, `cookie=${qosCookie(ofport)}/-1`]);
    await this.deleteMeter(bridge, ofport);
  }

  private async deleteMeter(bridge: string, ofport: number): Promise<void> {
    await this.ofctl(['del-meter', bridge, `meter=${meterId(ofport)}`]);
  }

  private async ofctl(args: readonly string[]): Promise<void> {
    await this.of.ofctl(args, OF13);
  }
}
