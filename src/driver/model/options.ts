/**
 * CreateNetwork options, validated once. Docker passes `-o k=v` as strings under
 * com.docker.network.generic (docs/docker-plugin-protocol.md §2); reading them from the
 * top level or as numbers would silently ignore them.
 */
import { OvsnetError } from '../../lib/errors.js';
import { ALLOW_CONNECTED, allowConnected } from '../../lib/subnets.js';
import { parseBridgeOptions, type BridgeOptions } from './bridge-options.js';
import { QOS_OPTIONS, parseQos, type Qos } from './qos-options.js';
import { GROUP, GROUP_OPTIONS, parseGroupOptions, type AllowRule } from './group-options.js';
import { EGRESS, INGRESS, POLICY_OPTIONS, parsePolicy, type NetRule } from './policy-options.js';

/** Where CreateNetwork's `-o` options are: strings, as Docker sends them (protocol §2). */
export const GENERIC = 'com.docker.network.generic';
const MTU_OPTION = 'com.docker.network.driver.mtu';
const INTERNAL = 'com.docker.network.internal';

/** ovsnet's own `-o` keys and their valid values. */
const NETWORK_OPTIONS: Readonly<Record<string, string>> = {
  'ovsnet.tag': 'a VLAN tag from 1 to 4094, or with ovsnet.encap=vxlan a VNI from 1 to 16777215 (default: the next free one)',
  'ovsnet.encap':
    'vlan (the default: one host, or with ovsnet.network a VLAN across hosts over OVSNET_UPLINK) or vxlan (a logical network across hosts over tunnels; needs ovsnet.network)',
  'ovsnet.network':
    'a name of 1-64 letters, digits, "-", "_" or ".", not starting with swarm- (reserved for swarm networks): with ovsnet.encap, of a logical network shared by hosts; without, of this one-host network (for its endpoint groups to name as their parent); with ovsnet.group, the parent\'s',
  'ovsnet.infra':
    "true gives the host a port of its own on the network, holding an address from the network's pool (needs --ipam-driver ovsnet), default false",
  [ALLOW_CONNECTED]: 'true lets the subnet overlap a segment the host is connected to (sharing an uplink on purpose), default false',
  ...QOS_OPTIONS,
  ...GROUP_OPTIONS,
  ...POLICY_OPTIONS,
};

export const MAX_VNI = 16_777_215;

export interface NetworkOptions extends BridgeOptions {
  /** VLAN tag (vlan) or VNI (vxlan) asked for. */
  readonly tag: number | undefined;
  readonly encap: 'vlan' | 'vxlan';
  /** Logical network name (vxlan only). */
  readonly logical: string | undefined;
  readonly mtu: number | undefined;
  readonly internal: boolean;
  /** -o ovsnet.allow-connected=true: the subnet may overlap the host's own segments. */
  readonly allowConnected: boolean;
  /** -o ovsnet.infra=true: the host joins the network through a port of its own (infra.ts). */
  readonly infra: boolean;
  /** -o ovsnet.bandwidth, ovsnet.burst, ovsnet.dscp ({} when none). */
  readonly qos: Qos;
  /** -o ovsnet.network without ovsnet.encap or ovsnet.group: the name groups give as their parent. */
  readonly groupsName: string | undefined;
  /** -o ovsnet.group (with ovsnet.network, the parent): this network is an endpoint group. */
  readonly group: { readonly name: string; readonly parent: string; readonly allow: readonly AllowRule[] } | undefined;
  /** -o ovsnet.allow on a parent: the groups whose containers may open connections into its own. */
  readonly allow: readonly AllowRule[];
  /** -o ovsnet.egress, ovsnet.ingress (policy-options.ts): undefined when not given, [] for none. */
  readonly egress: readonly NetRule[] | undefined;
  readonly ingress: readonly NetRule[] | undefined;
}

/** The logical networks of Docker swarm networks are named this + the network's ID (vxlan/swarm.ts). */
export const SWARM_PREFIX = 'swarm-';
const invalid = (message: string) => new OvsnetError('NETWORK_OPTION_INVALID', message);

/**
 * `networkId`: the network being created; only a swarm network's own `swarm-<its ID>` (which
 * the swarm path puts in its options) may use the swarm- prefix.
 */
export function parseNetworkOptions(options: Record<string, unknown>, networkId?: string): NetworkOptions {
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
  // swarm-<ID> is a swarm network's segment and pool: a name given by hand would join them.
  if (logical?.startsWith(SWARM_PREFIX) === true && logical !== `${SWARM_PREFIX}${networkId ?? ''}`) {
    throw invalid(
      `-o ovsnet.network=${logical} is not valid: names starting with ${SWARM_PREFIX} are reserved for Docker swarm networks (ovsnet names each one swarm-<its ID>); choose another name`,
    );
  }
  if (encap === 'vxlan' && logical === undefined) {
    throw invalid(
      "-o ovsnet.encap=vxlan needs -o ovsnet.network=NAME: the logical network this host's network joins (give the same NAME on every host)",
    );
  }
  const explicitEncap = text('ovsnet.encap') !== undefined;
  const groups = parseGroupOptions(text);
  if (groups.group !== undefined && explicitEncap) {
    throw invalid(
      `-o ovsnet.group=${groups.group} takes its parent's encapsulation (a group of a logical network is on every host where the parent is): drop -o ovsnet.encap`,
    );
  }
  if (encap === 'vlan' && explicitEncap && groups.allow.length > 0) {
    throw invalid(
      '-o ovsnet.allow applies to endpoint groups of a one-host network or of a logical network over VXLAN (-o ovsnet.encap=vxlan), not over a VLAN: drop it',
    );
  }
  const allow = allowConnected(text(ALLOW_CONNECTED));
  if (allow === undefined) throw invalid(`-o ${ALLOW_CONNECTED}=${text(ALLOW_CONNECTED) ?? ''} is not valid: expected true or false`);
  const infra = text('ovsnet.infra') ?? 'false';
  if (infra !== 'true' && infra !== 'false') throw invalid(`-o ovsnet.infra=${infra} is not valid: expected true or false`);
  const bridge = parseBridgeOptions(text, Object.keys(generic));
  if (!bridge.icc) refuseNoIcc({ group: groups.group, infra: infra === 'true', swarm: logical?.startsWith(SWARM_PREFIX) === true });
  const [egress, ingress] = [parsePolicy(EGRESS, generic[EGRESS]), parsePolicy(INGRESS, generic[INGRESS])];
  if (ingress !== undefined && (groups.group !== undefined || (!explicitEncap && logical !== undefined))) {
    throw invalid(
      `-o ${INGRESS} is not supported on endpoint groups nor on their parent (-o ovsnet.network without -o ovsnet.encap): they share the parent's gateway, whose firewall would let the sources in for every group; -o ${EGRESS} is`,
    );
  }
  if ((egress ?? ingress) !== undefined && logical?.startsWith(SWARM_PREFIX) === true) {
    throw invalid(
      `-o ${egress === undefined ? INGRESS : EGRESS} is not supported on Docker swarm networks (their service VIPs' flows take the tasks' traffic first): use it on a network of one host or a logical network`,
    );
  }
  return {
    ...bridge,
    tag:
      encap === 'vxlan'
        ? int('ovsnet.tag', 1, MAX_VNI, `a VNI from 1 to ${MAX_VNI}`)
        : int('ovsnet.tag', 1, 4094, 'a VLAN tag from 1 to 4094'),
    encap,
    logical: explicitEncap ? logical : undefined,
    groupsName: !explicitEncap && groups.group === undefined ? logical : undefined,
    group: groups.group === undefined ? undefined : { name: groups.group, parent: logical ?? '', allow: groups.allow },
    allow: groups.group === undefined ? groups.allow : [],
    mtu: int(MTU_OPTION, 68, 65535, 'an MTU from 68 to 65535'),
    internal: options[INTERNAL] === true || options[INTERNAL] === 'true',
    allowConnected: allow,
    infra: infra === 'true',
    qos: parseQos(text, '-o'),
    egress,
    ingress,
  };
}

const NO_ICC = '-o com.docker.network.bridge.enable_icc=false';

/** What enable_icc=false does not go with (network/icc-flows.ts: a member's frames reach its network's gateway only). */
function refuseNoIcc(o: { group: string | undefined; infra: boolean; swarm: boolean }): void {
  if (o.group !== undefined) {
    throw invalid(
      `${NO_ICC} with -o ovsnet.group=${o.group}: an endpoint group's traffic is ruled by -o ovsnet.allow (a group whose containers must not talk to each other: give each its own group, and allow none); drop one of the two`,
    );
  }
  if (o.infra) {
    throw invalid(
      `${NO_ICC} with -o ovsnet.infra=true: the host's infra port is a member of the network like a container, and with enable_icc=false the containers reach the gateway only; drop one of the two (the host is reached through the gateway anyway)`,
    );
  }
  if (o.swarm) {
    throw invalid(
      `${NO_ICC} on a swarm network: its tasks reach each other and the service VIPs across nodes; use separate swarm networks for services that must not talk`,
    );
  }
}

/**
 * GwAllocCheck (Engine 28+): whether a network created with these options needs no gateway
 * address, because ovsnet gives it no gateway port: an --internal network, or an endpoint group
 * (its containers get the parent's gateway). Decided on those two keys alone: CreateNetwork
 * checks the rest.
 */
export function needsNoGateway(options: Record<string, unknown>): boolean {
  const generic = options[GENERIC];
  const group = generic !== null && typeof generic === 'object' ? (generic as Record<string, unknown>)[GROUP] : undefined;
  return options[INTERNAL] === true || options[INTERNAL] === 'true' || (typeof group === 'string' && group.trim() !== '');
}
