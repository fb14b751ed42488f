/**
 * QoS options: `ovsnet.bandwidth`, `ovsnet.burst` and `ovsnet.dscp`, given
 * per network (`docker network create -o`) or per endpoint (`docker network connect
 * --driver-opt`, `docker run --network name=NET,driver-opt=...`: Docker puts an endpoint's
 * driver options at the top level of CreateEndpoint's Options, as strings). Parsing and the
 * merge of the two levels are pure; ovs/qos-flows.ts turns the result into an OpenFlow meter and
 * flows. Units are tc's: rates in bit/s (`kbit` = 1000 bit/s), sizes in bytes (`kb` = 1024
 * bytes) or bits (`kbit`).
 */
import { OvsnetError } from '../../lib/errors.js';

export const BANDWIDTH = 'ovsnet.bandwidth';
export const BURST = 'ovsnet.burst';
export const DSCP = 'ovsnet.dscp';

/** The QoS keys and their valid values, for option tables and refusals. */
export const QOS_OPTIONS: Readonly<Record<string, string>> = {
  [BANDWIDTH]: 'the rate out of each container, from 8kbit to 100gbit, e.g. 50mbit (units bit, kbit, mbit, gbit)',
  [BURST]:
    'the burst allowed above the rate, from 1kb to 1gb, e.g. 256kb (units b, kb, mb, gb or bit, kbit, mbit; needs ovsnet.bandwidth; default half a second at the rate)',
  [DSCP]: 'the DSCP value (0-63) set on every IPv4 and IPv6 packet out of each container, e.g. 46',
};

/** QoS of a network or an endpoint; absent fields are not set at that level. */
export interface Qos {
  /** Rate limit of traffic out of the container, kbit/s. */
  readonly rateKbps?: number;
  /** Burst above the rate, kbit (OpenFlow meters count bursts in kilobits for kbps bands). */
  readonly burstKbit?: number;
  readonly dscp?: number;
}

const RATE_UNITS: Readonly<Record<string, number>> = { bit: 1, kbit: 1e3, mbit: 1e6, gbit: 1e9 };
const SIZE_UNITS: Readonly<Record<string, number>> = {
  b: 8,
  kb: 8 * 1024,
  mb: 8 * 1024 ** 2,
  gb: 8 * 1024 ** 3,
  bit: 1,
  kbit: 1e3,
  mbit: 1e6,
};
const MIN_KBPS = 8;
const MAX_KBPS = 100_000_000;
const MIN_BURST_KBIT = 8;
const MAX_BURST_KBIT = (8 * 1024 ** 3) / 1000;

function amount(text: string, units: Readonly<Record<string, number>>): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s*([a-z]+)$/i.exec(text);
  const unit = units[m?.[2]?.toLowerCase() ?? ''];
  return m === null || unit === undefined ? undefined : Number(m[1]) * unit;
}

/**
 * Reads the QoS keys through `get` (undefined: not given). `flag` is how the user gave them
 * (`-o`, `--driver-opt`), for the messages. Throws NETWORK_OPTION_INVALID naming the bad value
 * and the valid form.
 */
export function parseQos(get: (key: string) => string | undefined, flag: string): Qos {
  const invalid = (key: string, v: string) =>
    new OvsnetError('NETWORK_OPTION_INVALID', `${flag} ${key}=${v} is not valid: expected ${QOS_OPTIONS[key] ?? ''}`);
  const bandwidth = get(BANDWIDTH);
  const burst = get(BURST);
  const dscp = get(DSCP);
  let rateKbps: number | undefined;
  if (bandwidth !== undefined) {
    const bits = amount(bandwidth, RATE_UNITS);
    if (bits === undefined || bits / 1000 < MIN_KBPS || bits / 1000 > MAX_KBPS) throw invalid(BANDWIDTH, bandwidth);
    rateKbps = Math.round(bits / 1000);
  }
  let burstKbit: number | undefined;
  if (burst !== undefined) {
    const bits = amount(burst, SIZE_UNITS);
    if (bits === undefined || bits / 1000 < MIN_BURST_KBIT || bits / 1000 > MAX_BURST_KBIT) throw invalid(BURST, burst);
    burstKbit = Math.ceil(bits / 1000);
  }
  if (dscp !== undefined && (!/^\d+$/.test(dscp) || Number(dscp) > 63)) throw invalid(DSCP, dscp);
  if (burstKbit !== undefined && rateKbps === undefined) {
    throw new OvsnetError(
      'NETWORK_OPTION_INVALID',
      `${flag} ${BURST}=${burst ?? ''} needs ${flag} ${BANDWIDTH}=RATE beside it: a burst is what is allowed above a rate`,
    );
  }
  return {
    ...(rateKbps === undefined ? {} : { rateKbps }),
    ...(burstKbit === undefined ? {} : { burstKbit }),
    ...(dscp === undefined ? {} : { dscp: Number(dscp) }),
  };
}

/**
 * An endpoint's QoS from its CreateEndpoint Options: ovsnet's keys among Docker's (which pass
 * untouched); any other `ovsnet.` key is refused with the valid ones. Values must be strings,
 * as Docker sends driver options.
 */
export function endpointQos(options: Readonly<Record<string, unknown>>): Qos {
  for (const key of Object.keys(options)) {
    if (key.startsWith('ovsnet.') && !(key in QOS_OPTIONS)) {
      const valid = Object.entries(QOS_OPTIONS)
        .map(([k, v]) => `${k} (${v})`)
        .join(', ');
      throw new OvsnetError('NETWORK_OPTION_INVALID', `--driver-opt ${key} is not an ovsnet endpoint option; valid ones: ${valid}`);
    }
  }
  const qos = parseQos((key) => {
    const v = options[key];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'string')
      throw new OvsnetError('NETWORK_OPTION_INVALID', `--driver-opt ${key} must be a string, got ${JSON.stringify(v)}`);
    return v.trim();
  }, '--driver-opt');
  return qos;
}

/**
 * What applies to an endpoint: each of its own values wins over its network's; a burst goes
 * with the rate it was given with (parseQos refuses one alone). Undefined when nothing applies.
 */
export function effectiveQos(network: Qos | undefined, endpoint: Qos | undefined): Qos | undefined {
  const rated = endpoint?.rateKbps !== undefined ? endpoint : network;
  const rateKbps = rated?.rateKbps;
  const dscp = endpoint?.dscp ?? network?.dscp;
  if (rateKbps === undefined && dscp === undefined) return undefined;
  return {
    ...(rateKbps === undefined ? {} : { rateKbps, burstKbit: rated?.burstKbit ?? defaultBurst(rateKbps) }),
    ...(dscp === undefined ? {} : { dscp }),
  };
}

/**
 * Half a second at the rate, at least 16 kbit. A TCP flow through a meter's drop band reaches
 * the rate only with a burst that large (measured on the userspace datapath at 20 mbit: 9.9
 * mbit/s with a tenth of a second, 19.8 with 0.42 s, 19.3 with a whole second).
 */
export function defaultBurst(rateKbps: number): number {
  return Math.max(16, Math.ceil(rateKbps / 2));
}

export const isSet = (q: Qos | undefined): q is Qos => q !== undefined && Object.keys(q).length > 0;

/** The QoS field of a record: absent when no value was given. */
export const qosField = (qos: Qos): { qos?: Qos } => (isSet(qos) ? { qos } : {});
