/**
 * CreateNetwork options, validated once. Docker passes `-o k=v` as strings under
 * com.docker.network.generic (docs/docker-plugin-protocol.md §2); reading them from the
 * top level or as numbers would silently ignore them.
 */
import { OvsnetError } from '../errors.js';
import { ALLOW_CONNECTED, allowConnected } from '../subnets.js';

const GENERIC = 'com.docker.network.generic';
const MTU_OPTION = 'com.docker.network.driver.mtu';
const INTERNAL = 'com.docker.network.internal';

/** ovsnet's own `-o` keys and their valid values. */
const NETWORK_OPTIONS: Readonly<Record<string, string>> = {
  'ovsnet.tag': 'a VLAN tag from 1 to 4094, or with ovsnet.encap=vxlan a VNI from 1 to 16777215 (default: the next free one)',
  'ovsnet.encap': 'vlan (one host, the default) or vxlan (a logical network across hosts; needs ovsnet.network)',
  'ovsnet.network': 'the name of a logical network shared by hosts: 1-64 letters, digits, "-", "_" or "." (needs ovsnet.encap=vxlan)',
  [ALLOW_CONNECTED]: 'true lets the subnet overlap a segment the host is connected to (sharing an uplink on purpose), default false',
};

export const MAX_VNI = 16_777_215;

export interface NetworkOptions {
  /** VLAN tag (vlan) or VNI (vxlan) asked for. */
  readonly tag: number | undefined;
  readonly encap: 'vlan' | 'vxlan';
  /** Logical network name (vxlan only). */
  readonly logical: string | undefined;
  readonly mtu: number | undefined;
  readonly internal: boolean;
  /** -o ovsnet.allow-connected=true: the subnet may overlap the host's own segments. */
  readonly allowConnected: boolean;
}

const invalid = (message: string) => new OvsnetError('NETWORK_OPTION_INVALID', message);

export function parseNetworkOptions(options: Record<string, unknown>): NetworkOptions {
  const raw = options[GENERIC];
  const generic: Record<string, unknown> = raw !== null && typeof raw === 'object' ? (raw as Record<string, unknown>) : {};
  for (const key of Object.keys(generic)) {
    if (key.startsWith('ovsnet.') && !(key in NETWORK_OPTIONS)) {
      const valid = Object.entries(NETWORK_OPTIONS)
        .map(([k, v]) => `${k} (${v})`)
        .join(', ');
      throw invalid(`-o ${key} is not an ovsnet option; valid ones: ${valid}`);
    }
  }
  const text = (key: string): string | undefined => {
    const v = generic[key];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'string' && typeof v !== 'number') throw invalid(`-o ${key} must be a string, got ${JSON.stringify(v)}`);
    return String(v).trim();
  };
  const int = (key: string, min: number, max: number, what: string): number | undefined => {
    const v = text(key);
    if (v === undefined) return undefined;
    if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) throw invalid(`-o ${key}=${v} is not valid: expected ${what}`);
    return Number(v);
  };
  const encap = text('ovsnet.encap') ?? 'vlan';
  if (encap !== 'vlan' && encap !== 'vxlan') throw invalid(`-o ovsnet.encap=${encap} is not valid: expected vlan or vxlan`);
  const logical = text('ovsnet.network');
  if (logical !== undefined && !/^[A-Za-z0-9_.-]{1,64}$/.test(logical)) {
    throw invalid(`-o ovsnet.network=${logical} is not valid: expected ${NETWORK_OPTIONS['ovsnet.network'] ?? ''}`);
  }
  if (encap === 'vxlan' && logical === undefined) {
    throw invalid(
      "-o ovsnet.encap=vxlan needs -o ovsnet.network=NAME: the logical network this host's network joins (give the same NAME on every host)",
    );
  }
  if (encap === 'vlan' && logical !== undefined) {
    throw invalid(`-o ovsnet.network=${logical} spans hosts over VXLAN: add -o ovsnet.encap=vxlan`);
  }
  const allow = allowConnected(text(ALLOW_CONNECTED));
  if (allow === undefined) throw invalid(`-o ${ALLOW_CONNECTED}=${text(ALLOW_CONNECTED) ?? ''} is not valid: expected true or false`);
  return {
    tag:
      encap === 'vxlan'
        ? int('ovsnet.tag', 1, MAX_VNI, `a VNI from 1 to ${MAX_VNI}`)
        : int('ovsnet.tag', 1, 4094, 'a VLAN tag from 1 to 4094'),
    encap,
    logical,
    mtu: int(MTU_OPTION, 68, 65535, 'an MTU from 68 to 65535'),
    internal: options[INTERNAL] === true || options[INTERNAL] === 'true',
    allowConnected: allow,
  };
}
