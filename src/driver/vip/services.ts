/**
 * A swarm network's services as the local Engine lists them (`GET /networks/{id}?verbose=true`,
 * its `Services`: name -> { VIP, Ports, LocalLBIndex, Tasks: [{ EndpointIP, ... }] }), checked
 * into what the datapath may program. Nothing the Engine says is trusted: a VIP or task address
 * must be an IPv4 address inside one of the network's subnets (and a VIP none of the subnet's
 * network or broadcast address, nor a task's), names have no control characters, and counts are
 * capped. What fails is skipped with a one-line reason whose values are escaped and cut short,
 * so that an Engine cannot write log lines of its own. Pure: no I/O.
 */
import { CidrError, containsAddress, formatAddress, last, parseAddress, parseCidr, type Prefix } from '../../lib/cidr.js';

/** One service with a VIP: the address clients dial, and the addresses of its tasks behind it. */
export interface ServiceVip {
  readonly service: string;
  readonly vip: string;
  /** Task addresses, IPv4 dotted, deduplicated, sorted; empty: the VIP is answered with a refusal. */
  readonly tasks: readonly string[];
  /**
   * The node each task runs on, by task address, as swarm knows the node (its advertise address,
   * the task's `Info["Host IP"]`), for the tasks whose entry gives a valid IPv4 address.
   */
  readonly nodes?: Readonly<Record<string, string>>;
}

export const SERVICE_LIMITS = { services: 4096, tasksPerService: 4096, nameLength: 255 } as const;

// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROLS = /[\0-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
// C1 controls and Unicode's separators and bidi overrides, which JSON.stringify leaves as they are.
const ESCAPE = /[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** A value as a reason shows it: JSON-quoted (so escaped), at most 40 characters of it. */
export function shown(v: unknown): string {
  const text = typeof v === 'string' ? v : (JSON.stringify(v) ?? String(v));
  const cut = text.length > 40 ? `${text.slice(0, 40)}...` : text;
  return JSON.stringify(cut).replace(ESCAPE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The IPv4 subnets among `subnets` (others are not ours to check against). */
function ipv4Subnets(subnets: readonly string[]): Prefix[] {
  const out: Prefix[] = [];
  for (const s of subnets) {
    try {
      const p = parseCidr(s);
      if (p.family === 4) out.push({ family: 4, base: p.base, bits: p.bits });
    } catch (err) {
      if (!(err instanceof CidrError)) throw err;
    }
  }
  return out;
}

/** The value of an IPv4 address inside one of `nets`, and that subnet; or why not. */
function inSubnet(v: unknown, nets: readonly Prefix[]): { value: bigint; net: Prefix } | string {
  if (typeof v !== 'string' || v.length > 15 || !/^\d+\.\d+\.\d+\.\d+$/.test(v)) return `${shown(v)} is not an IPv4 address`;
  let value: bigint;
  try {
    value = parseAddress(v).value;
  } catch {
    return `${shown(v)} is not an IPv4 address`;
  }
  const net = nets.find((n) => containsAddress(n, 4, value));
  return net === undefined ? `${shown(v)} is outside the network's subnets` : { value, net };
}

/** A node's address as the Engine gives it (IPv4 dotted), canonical; undefined for anything else. */
function nodeAddress(v: unknown): string | undefined {
  if (typeof v !== 'string' || v.length > 15 || !/^\d+\.\d+\.\d+\.\d+$/.test(v)) return undefined;
  try {
    return formatAddress(4, parseAddress(v).value);
  } catch {
    return undefined;
  }
}

/** The subnets of a network's verbose view (`IPAM.Config[].Subnet`), as strings; [] when it has none. */
export function engineSubnets(body: unknown): string[] {
  if (!isObject(body) || !isObject(body.IPAM) || !Array.isArray(body.IPAM.Config)) return [];
  return body.IPAM.Config.flatMap((c) => (isObject(c) && typeof c.Subnet === 'string' && c.Subnet.length <= 64 ? [c.Subnet] : []));
}

/** The services of a network's verbose view with a valid VIP, sorted by name, and what was skipped. */
export function parseServices(body: unknown, subnets: readonly string[]): { services: ServiceVip[]; skipped: string[] } {
  const skipped: string[] = [];
  if (!isObject(body)) return { services: [], skipped: ['the answer is not a JSON object'] };
  const listed = body.Services;
  if (listed === undefined || listed === null) return { services: [], skipped: [] };
  if (!isObject(listed)) return { services: [], skipped: ['Services is not an object'] };
  const nets = ipv4Subnets(subnets);
  const services: ServiceVip[] = [];
  // Own keys only (Object.keys): a "__proto__" key of JSON.parse is an own key, read as data.
  const names = Object.keys(listed);
  if (names.length > SERVICE_LIMITS.services) {
    skipped.push(`${names.length - SERVICE_LIMITS.services} services beyond the first ${SERVICE_LIMITS.services}`);
  }
  for (const name of names.slice(0, SERVICE_LIMITS.services)) {
    const s = parseService(name, listed[name], nets, skipped);
    if (s !== undefined) services.push(s);
  }
  services.sort((a, b) => (a.service < b.service ? -1 : a.service > b.service ? 1 : 0));
  return { services, skipped };
}

function parseService(name: string, entry: unknown, nets: readonly Prefix[], skipped: string[]): ServiceVip | undefined {
  if (name === '' || name.length > SERVICE_LIMITS.nameLength || CONTROLS.test(name)) {
    skipped.push(`service ${shown(name)}: not a service name (1-${SERVICE_LIMITS.nameLength} characters, no control characters)`);
    return undefined;
  }
  if (!isObject(entry)) {
    skipped.push(`service ${shown(name)}: not an object`);
    return undefined;
  }
  // A dnsrr service has no VIP (Docker lists "<nil>" or nothing): its tasks are reached by DNS alone.
  if (entry.VIP === undefined || entry.VIP === null || entry.VIP === '' || entry.VIP === '<nil>') return undefined;
  const vip = inSubnet(entry.VIP, nets);
  if (typeof vip === 'string') {
    skipped.push(`service ${shown(name)}: VIP ${vip}`);
    return undefined;
  }
  if (vip.net.bits <= 30 && (vip.value === vip.net.base || vip.value === last(vip.net))) {
    skipped.push(`service ${shown(name)}: VIP ${shown(entry.VIP)} is its subnet's network or broadcast address`);
    return undefined;
  }
  const tasks = new Set<bigint>();
  const nodes: Record<string, string> = {};
  const listed = Array.isArray(entry.Tasks) ? entry.Tasks : entry.Tasks === undefined || entry.Tasks === null ? [] : undefined;
  if (listed === undefined) skipped.push(`service ${shown(name)}: Tasks is not a list`);
  for (const [i, task] of (listed ?? []).entries()) {
    if (i >= SERVICE_LIMITS.tasksPerService) {
      skipped.push(`service ${shown(name)}: ${(listed ?? []).length - i} tasks beyond the first ${SERVICE_LIMITS.tasksPerService}`);
      break;
    }
    const at = inSubnet(isObject(task) ? task.EndpointIP : undefined, nets);
    if (typeof at === 'string') skipped.push(`service ${shown(name)}: task ${i}: EndpointIP ${at}`);
    else if (at.value === vip.value) {
      // Two owners of one address: whichever the datapath picked, traffic would go astray.
      skipped.push(`service ${shown(name)}: VIP ${shown(entry.VIP)} is also a task's address`);
      return undefined;
    } else {
      tasks.add(at.value);
      const node = isObject(task) && isObject(task.Info) ? nodeAddress(task.Info['Host IP']) : undefined;
      if (node !== undefined) nodes[formatAddress(4, at.value)] = node;
    }
  }
  const sorted = [...tasks].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).map((v) => formatAddress(4, v));
  return { service: name, vip: formatAddress(4, vip.value), tasks: sorted, ...(Object.keys(nodes).length === 0 ? {} : { nodes }) };
}
