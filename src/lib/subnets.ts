/**
 * What may be a container subnet: the one place IPAM (pools.ts, config's default pools) and the
 * network driver (CreateNetwork's IPv4Data/IPv6Data from any IPAM) ask. Pure: the host's
 * addresses and routes are handed in (host-nets.ts reads them).
 * Refused, from the IANA special-purpose registries (iana-ipv4-special-registry,
 * iana-ipv6-special-registry, ipv6-address-space) where the addresses cannot number containers:
 * they are source-only, loopback, link-scoped, multicast, reserved, or given to a protocol that
 * the host's stack or routers treat specially. Documentation (192.0.2.0/24, 198.51.100.0/24,
 * 203.0.113.0/24, 2001:db8::/32, 3fff::/20), benchmarking (198.18.0.0/15) and shared
 * (100.64.0.0/10) space stay usable: behind the masquerade they never leave the host, and labs
 * number machines from them.
 */
import { CidrError, formatPrefix, last, overlaps, parseCidr, prefix, type Family, type Prefix } from './cidr.js';
import { OvsnetError } from './errors.js';

/** The shortest prefix a subnet may have per family (OVSNET_MIN_PREFIX). */
export type MinPrefix = Readonly<Record<Family, number>>;

export const DEFAULT_MIN_PREFIX: MinPrefix = { 4: 8, 6: 32 };

/** The option (`--ipam-opt` for ovsnet's IPAM, `-o` for the driver) that lets a subnet share a connected segment. */
export const ALLOW_CONNECTED = 'ovsnet.allow-connected';

const PRIVATE_V4 = 'use a private range such as 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16';
const PRIVATE_V6 = 'use a unique local range (fc00::/7), e.g. fd00:1234:5678::/48 or a /64 of it';

interface Special {
  readonly block: Prefix;
  readonly what: string;
}

const special = (cidr: string, what: string): Special => ({ block: prefix(cidr), what });

/** Blocks no subnet may overlap. Order matters only for the message: the most specific first. */
export const SPECIAL_BLOCKS: readonly Special[] = [
  special('0.0.0.0/8', '"this network", source-only (RFC 791, RFC 1122)'),
  special('127.0.0.0/8', 'loopback (RFC 1122)'),
  special('169.254.0.0/16', 'link-local (RFC 3927)'),
  special('192.0.0.0/24', 'reserved for IETF protocol assignments (RFC 6890)'),
  special('192.88.99.0/24', 'the deprecated 6to4 relay anycast block (RFC 7526)'),
  special('224.0.0.0/4', 'multicast (RFC 5771)'),
  special('240.0.0.0/4', 'reserved, with the limited broadcast address 255.255.255.255 (RFC 1112, RFC 919)'),
  special('::/128', 'the unspecified address (RFC 4291)'),
  special('::1/128', 'loopback (RFC 4291)'),
  special('::ffff:0:0/96', 'IPv4-mapped addresses (RFC 4291)'),
  special('64:ff9b::/96', 'the NAT64 well-known prefix (RFC 6052)'),
  special('64:ff9b:1::/48', 'the local-use NAT64 prefix (RFC 8215)'),
  special('100::/64', 'discard-only (RFC 6666)'),
  special('2001::/23', 'reserved for IETF protocol assignments: Teredo, ORCHID, AMT... (RFC 2928)'),
  special('2002::/16', '6to4 (RFC 3056)'),
  special('fe80::/10', 'link-local (RFC 4291)'),
  special('fec0::/10', 'the deprecated site-local block (RFC 3879)'),
  special('ff00::/8', 'multicast (RFC 4291)'),
];

/** IPv6 addresses are allocated only from these (IANA ipv6-address-space); the rest is reserved by the IETF. */
const ALLOCATED_V6: readonly Prefix[] = [prefix('2000::/3'), prefix('fc00::/7')];

const refused = (message: string) => new OvsnetError('SUBNET_INVALID', message);

const alternative = (family: Family) => (family === 4 ? PRIVATE_V4 : PRIVATE_V6);

/**
 * Parses a subnet as Docker or a user writes it ("10.1.0.0/24"), host bits cleared. IPv6 zones
 * ("fe80::%eth0/64") name an interface: no subnet has one.
 */
export function parseSubnet(text: string, field: string): Prefix {
  if (text.includes('%')) {
    throw refused(
      `${field} ${JSON.stringify(text)} has an IPv6 zone (%...): a subnet is not tied to an interface; write it without the zone`,
    );
  }
  try {
    const p = parseCidr(text);
    return { family: p.family, base: p.base, bits: p.bits };
  } catch (err) {
    throw refused(`${field}: ${err instanceof CidrError ? err.message : String(err)}`);
  }
}

/** Refuses a subnet that is too large or overlaps a special-purpose block; the message names the rule and what would do. */
export function checkSubnet(p: Prefix, field: string, min: MinPrefix = DEFAULT_MIN_PREFIX): void {
  const name = formatPrefix(p);
  if (p.bits < min[p.family]) {
    throw refused(
      `${field} ${name} is too large: IPv${p.family} subnets of ovsnet are /${min[p.family]} or longer (OVSNET_MIN_PREFIX); ${alternative(p.family)}`,
    );
  }
  for (const s of SPECIAL_BLOCKS) {
    if (overlaps(p, s.block)) {
      throw refused(
        `${field} ${name} overlaps ${formatPrefix(s.block)}, ${s.what}, which cannot number containers; ${alternative(p.family)}`,
      );
    }
  }
  if (p.family === 6 && !ALLOCATED_V6.some((a) => p.base >= a.base && last(p) <= last(a))) {
    throw refused(
      `${field} ${name} is outside global unicast (2000::/3) and unique local (fc00::/7) space, the rest being reserved by the IETF; ${PRIVATE_V6}`,
    );
  }
}

/**
 * A gateway as Docker sends it ("10.1.0.1/24"): inside its subnet, with the subnet's prefix
 * length, neither the network address nor the IPv4 broadcast address, and without a zone.
 */
export function checkGateway(gateway: string, subnet: Prefix, field: string): void {
  const pool = formatPrefix(subnet);
  if (gateway.includes('%')) throw refused(`${field} ${JSON.stringify(gateway)} has an IPv6 zone (%...): give the address without it`);
  let g: Prefix & { address: bigint };
  try {
    g = parseCidr(gateway.includes('/') ? gateway : `${gateway}/${subnet.bits}`);
  } catch (err) {
    throw refused(`${field}: ${err instanceof CidrError ? err.message : String(err)}`);
  }
  const first = subnet.bits >= (subnet.family === 4 ? 31 : 127) ? subnet.base : subnet.base + 1n;
  const lastUsable = subnet.family === 4 && subnet.bits < 31 ? last(subnet) - 1n : last(subnet);
  const example = `e.g. ${formatPrefix({ ...subnet, base: first })}`;
  if (g.family !== subnet.family || g.address < first || g.address > lastUsable) {
    throw refused(`${field} ${gateway} is not a usable address of subnet ${pool}: give one inside it, ${example}`);
  }
  if (g.bits !== subnet.bits) {
    throw refused(
      `${field} ${gateway} has prefix length /${g.bits} but its subnet ${pool} has /${subnet.bits}: use the subnet's, ${example}`,
    );
  }
}

/** An address or a route of the host, and the interface it is on. */
export interface HostNet {
  readonly prefix: Prefix;
  readonly dev: string;
  readonly kind: 'address' | 'connected route' | 'route';
}

/**
 * Refuses a subnet overlapping one of the host's own addresses or connected routes (routes via a
 * gateway are other networks' business: a subnet may shadow them on purpose). `how` says how to
 * share the segment anyway, `suggest` offers a free subnet.
 */
export function checkHostOverlap(p: Prefix, field: string, host: readonly HostNet[], how: string, suggest?: string): void {
  const hit = host.find((h) => h.kind !== 'route' && overlaps(p, h.prefix));
  if (hit === undefined) return;
  const what =
    hit.kind === 'address'
      ? `the host's address ${formatPrefix(hit.prefix).replace(/\/(32|128)$/, '')}`
      : `the host's connected route ${formatPrefix(hit.prefix)}`;
  throw new OvsnetError(
    'SUBNET_HOST_OVERLAP',
    `${field} ${formatPrefix(p)} overlaps ${what} on ${hit.dev}: containers could not reach that segment and the host would route it two ways; ${
      suggest === undefined ? 'choose a subnet no host interface is on' : `choose a free subnet such as ${suggest}`
    }, or share the segment on purpose with ${how}`,
  );
}

/** OVSNET_MIN_PREFIX: "V4,V6", IPv4 1-30 and IPv6 1-124; the reason when not valid. */
export function parseMinPrefix(raw: string): MinPrefix | string {
  const m = /^\/?(\d{1,2}),\/?(\d{1,3})$/.exec(raw.replace(/\s/g, ''));
  if (m === null) return 'not two prefix lengths';
  const v4 = Number(m[1]);
  const v6 = Number(m[2]);
  if (v4 < 1 || v4 > 30) return `IPv4 /${v4} is outside 1-30`;
  if (v6 < 1 || v6 > 124) return `IPv6 /${v6} is outside 1-124`;
  return { 4: v4, 6: v6 };
}

/** `ovsnet.allow-connected`'s value: absent or "false" is false, "true" true, anything else undefined (invalid). */
export function allowConnected(value: unknown): boolean | undefined {
  if (value === undefined || value === null || value === 'false' || value === false) return false;
  return value === 'true' || value === true ? true : undefined;
}
