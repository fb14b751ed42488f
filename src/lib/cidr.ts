/**
 * Pure address math, shared by IPAM, the network driver and config: prefixes and addresses as
 * bigints, parsed and printed through ip-address (RFC 5952 canonical IPv6). No I/O; tested
 * exhaustively in test/lib/cidr.test.ts.
 */
import { requirePackage } from './packages.js';

const { Address4, Address6 } = requirePackage('ip-address');

export type Family = 4 | 6;

export interface Prefix {
  readonly family: Family;
  /** The network address. */
  readonly base: bigint;
  readonly bits: number;
}

const WIDTH: Record<Family, number> = { 4: 32, 6: 128 };

export class CidrError extends Error {}

/** An IPv4 address as ovsnet and Docker write it: four octets 0-255, no leading zero. */
const CANONICAL_V4 =
  /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;

/** An address as a number; frozen, as parseAddress hands the same object to every caller of a text. */
export interface ParsedAddress {
  readonly family: Family;
  readonly value: bigint;
}

/** At most this many parsed addresses are remembered (the oldest go first). */
export const PARSED_LIMIT = 4096;

/**
 * The addresses parsed lately, by their text. The same few are parsed on every call (a pool's
 * base in its PoolID, an endpoint's address each time its MAC is derived, each reservation the
 * watch brings back): 3.5% of a container's calls in the requests bench went to parsing them.
 * The parse is a function of the text alone, so nothing is ever stale: a record whose subnet or
 * address changes has another text, parsed anew. A text that is no address is not remembered
 * (it throws each time).
 */
const parsedAddresses = new Map<string, ParsedAddress>();

/** Parses "a.b.c.d" or an IPv6 address (no prefix length). */
export function parseAddress(text: string): ParsedAddress {
  const hit = parsedAddresses.get(text);
  if (hit !== undefined) return hit;
  const parsed = Object.freeze(parseAddressText(text));
  if (parsedAddresses.size >= PARSED_LIMIT) parsedAddresses.delete(parsedAddresses.keys().next().value ?? '');
  parsedAddresses.set(text, parsed);
  return parsed;
}

function parseAddressText(text: string): ParsedAddress {
  const t = text.trim();
  // The usual form read directly (ip-address's parse was 2% of a container start's CPU); any other goes through ip-address.
  const v4 = CANONICAL_V4.exec(t);
  if (v4 !== null) return { family: 4, value: BigInt(((+v4[1]! << 24) >>> 0) + (+v4[2]! << 16) + (+v4[3]! << 8) + +v4[4]!) };
  if (/^\d+\.\d+\.\d+\.\d+$/.test(t) && Address4.isValid(t)) return { family: 4, value: new Address4(t).bigInt() };
  if (t.includes(':') && !t.includes('/') && Address6.isValid(t)) return { family: 6, value: new Address6(t).bigInt() };
  throw new CidrError(`${JSON.stringify(text)} is not an IP address (expected e.g. 10.0.0.5 or fd00::5)`);
}

/**
 * Parses "addr/len" into the prefix, host bits cleared (`base`: "10.0.0.5/24" is 10.0.0.0/24),
 * and the address as written (`address`: 10.0.0.5), for callers that want the host part (an
 * address Docker sends in CIDR form). prefix() keeps only the prefix.
 */
export function parseCidr(text: string): Prefix & { address: bigint } {
  const t = text.trim();
  const slash = t.lastIndexOf('/');
  const len = t.slice(slash + 1);
  if (slash < 0 || !/^\d{1,3}$/.test(len)) {
    throw new CidrError(`${JSON.stringify(text)} is not a CIDR (expected e.g. 10.0.0.0/24 or fd00::/64)`);
  }
  const { family, value } = parseAddressOr(t.slice(0, slash), text);
  const bits = Number(len);
  if (bits > WIDTH[family]) {
    throw new CidrError(`${JSON.stringify(text)}: the prefix length must be 0-${WIDTH[family]} for IPv${family}`);
  }
  return { family, bits, base: value & maskOf(family, bits), address: value };
}

function parseAddressOr(addr: string, whole: string): ParsedAddress {
  try {
    return parseAddress(addr);
  } catch {
    throw new CidrError(`${JSON.stringify(whole)} is not a CIDR (expected e.g. 10.0.0.0/24 or fd00::/64)`);
  }
}

export function prefix(text: string): Prefix {
  const { family, base, bits } = parseCidr(text);
  return { family, base, bits };
}

/** Each family's masks by prefix length, made on first use (a parse per record read made one each time). */
const MASKS: Record<Family, bigint[]> = { 4: [], 6: [] };

function maskOf(family: Family, bits: number): bigint {
  const known = MASKS[family][bits];
  if (known !== undefined) return known;
  const w = BigInt(WIDTH[family]);
  return (MASKS[family][bits] = ((1n << w) - 1n) ^ ((1n << (w - BigInt(bits))) - 1n));
}

export function size(p: Prefix): bigint {
  return 1n << BigInt(WIDTH[p.family] - p.bits);
}

export function last(p: Prefix): bigint {
  return p.base + size(p) - 1n;
}

export function contains(outer: Prefix, inner: Prefix): boolean {
  return outer.family === inner.family && inner.bits >= outer.bits && inner.base >= outer.base && last(inner) <= last(outer);
}

export function containsAddress(p: Prefix, family: Family, value: bigint): boolean {
  return p.family === family && value >= p.base && value <= last(p);
}

export function overlaps(a: Prefix, b: Prefix): boolean {
  return a.family === b.family && a.base <= last(b) && b.base <= last(a);
}

export function formatAddress(family: Family, value: bigint): string {
  return family === 4 ? Address4.fromBigInt(value).correctForm() : Address6.fromBigInt(value).correctForm();
}

export function formatPrefix(p: Prefix): string {
  return `${formatAddress(p.family, p.base)}/${p.bits}`;
}

/** "10.0.0.5/24": an address with its pool's prefix length, as Docker wants addresses. */
export function formatWithLength(family: Family, value: bigint, bits: number): string {
  return `${formatAddress(family, value)}/${bits}`;
}

/**
 * The addresses of `range` that may be handed out in `pool`: never the pool's network address
 * (nor, for IPv6, the subnet-router anycast address, which is the same one) and never an IPv4
 * broadcast address; /31 and /32 (RFC 3021) and /127, /128 keep every address.
 */
export function usableBounds(pool: Prefix, range: Prefix): { first: bigint; last: bigint } | undefined {
  let lo = range.base;
  let hi = last(range);
  const hostBits = WIDTH[pool.family] - pool.bits;
  if (hostBits >= 2) {
    if (lo === pool.base) lo += 1n;
    if (pool.family === 4 && hi === last(pool)) hi -= 1n;
  }
  return lo <= hi ? { first: lo, last: hi } : undefined;
}

/** The default gateway of a pool: its first address plus one. The one place this rule lives. */
export function defaultGateway(pool: Prefix): bigint {
  return size(pool) > 1n ? pool.base + 1n : pool.base;
}

/** The `index`th subnet of length `bits` inside `outer`. */
export function subnetAt(outer: Prefix, bits: number, index: bigint): Prefix {
  return { family: outer.family, bits, base: outer.base + index * (1n << BigInt(WIDTH[outer.family] - bits)) };
}

export function subnetCount(outer: Prefix, bits: number): bigint {
  return bits < outer.bits ? 0n : 1n << BigInt(bits - outer.bits);
}
