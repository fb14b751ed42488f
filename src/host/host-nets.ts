/**
 * The host's own addresses and its routes, for subnets.ts's rules: a subnet must not overlap an
 * address or connected route of the host, and a dynamic pool shadows no route at all. Reads
 * /proc/net/route, /proc/net/ipv6_route and the interfaces' addresses: no process spawned.
 * Default routes, loopback and link-scoped (fe80::/10, ff00::/8) entries are left out: no
 * subnet may overlap those anyway (subnets.ts), and every pool would overlap a default route.
 */
import fs from 'node:fs';
import os from 'node:os';
import { parseAddress, type Prefix } from '../lib/cidr.js';
import type { HostNet } from '../lib/subnets.js';

/** RTF_GATEWAY in /proc/net/route's Flags: the route goes via a next hop, it is not connected. */
const RTF_GATEWAY = 0x2;

export function hostNets(procNet = '/proc/net'): HostNet[] {
  return [...routes4(procNet), ...routes6(procNet), ...addresses()];
}

function routes4(procNet: string): HostNet[] {
  const out: HostNet[] = [];
  for (const line of read(`${procNet}/route`).split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    const [dev, dest, , flags, , , , mask] = f;
    if (dev === undefined || dest === undefined || flags === undefined || mask === undefined || dev === 'lo') continue;
    const bits = popcount(littleEndianHex(mask));
    if (bits === 0) continue;
    const viaGateway = (parseInt(flags, 16) & RTF_GATEWAY) !== 0;
    out.push({ prefix: { family: 4, base: littleEndianHex(dest), bits }, dev, kind: viaGateway ? 'route' : 'connected route' });
  }
  return out;
}

function routes6(procNet: string): HostNet[] {
  const out: HostNet[] = [];
  for (const line of read(`${procNet}/ipv6_route`).split('\n')) {
    const [dest, len, , , nextHop, , , , , dev] = line.trim().split(/\s+/);
    if (dest === undefined || len === undefined || nextHop === undefined || dev === undefined || dev === 'lo') continue;
    const bits = parseInt(len, 16);
    // Host routes of local addresses (/128, listed as addresses below) and link-scoped ones are no networks.
    if (bits === 0 || bits === 128 || /^fe[89ab]|^ff/.test(dest)) continue;
    const connected = /^0+$/.test(nextHop);
    out.push({ prefix: { family: 6, base: BigInt(`0x${dest}`), bits }, dev, kind: connected ? 'connected route' : 'route' });
  }
  return out;
}

function addresses(): HostNet[] {
  const out: HostNet[] = [];
  for (const [dev, list] of Object.entries(os.networkInterfaces())) {
    for (const a of list ?? []) {
      if (a.internal || a.address.includes('%') || /^fe[89ab]/i.test(a.address)) continue;
      const { family, value } = parseAddress(a.address);
      const bits = family === 4 ? 32 : 128;
      out.push({ prefix: { family, base: value, bits } satisfies Prefix, dev, kind: 'address' });
    }
  }
  return out;
}

function read(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

/** /proc/net/route prints IPv4 addresses as little-endian hex words. */
function littleEndianHex(hex: string): bigint {
  const v = parseInt(hex, 16) >>> 0;
  return BigInt((((v & 0xff) << 24) | ((v & 0xff00) << 8) | ((v >>> 8) & 0xff00) | (v >>> 24)) >>> 0);
}

function popcount(v: bigint): number {
  let n = 0;
  for (let x = v; x > 0n; x >>= 1n) n += Number(x & 1n);
  return n;
}
