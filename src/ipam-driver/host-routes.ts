/**
 * The host's routes, so a dynamic pool never shadows a network the host already reaches.
 * Reads /proc/net/route and /proc/net/ipv6_route: no process spawned. Default routes are left
 * out (every pool would overlap them).
 */
import fs from 'node:fs';
import type { Prefix } from '../cidr.js';

export function hostRoutes(procNet = '/proc/net'): Prefix[] {
  const routes: Prefix[] = [];
  for (const line of read(`${procNet}/route`).split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 8 || f[1] === undefined || f[7] === undefined) continue;
    const dest = littleEndianHex(f[1]);
    const bits = popcount(littleEndianHex(f[7]));
    if (bits > 0) routes.push({ family: 4, base: dest, bits });
  }
  for (const line of read(`${procNet}/ipv6_route`).split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 2 || f[0] === undefined || f[1] === undefined) continue;
    const bits = parseInt(f[1], 16);
    // Host routes of local addresses (/128) and link-local/multicast are not networks.
    if (bits === 0 || bits === 128 || /^fe80|^ff/.test(f[0])) continue;
    routes.push({ family: 6, base: BigInt(`0x${f[0]}`), bits });
  }
  return routes;
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
