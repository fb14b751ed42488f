/** Addresses as the driver needs them: bytes for netlink, and MACs for endpoints. */
import { randomBytes } from 'node:crypto';
import { CidrError, parseCidr, type Family } from '../../lib/cidr.js';
import { OvsnetError } from '../../lib/errors.js';

export function parseCidrAddress(cidr: string, field: string): { family: Family; bytes: Buffer; bits: number } {
  try {
    const p = parseCidr(cidr);
    const hex = p.address.toString(16).padStart(p.family === 4 ? 8 : 32, '0');
    return { family: p.family, bytes: Buffer.from(hex, 'hex'), bits: p.bits };
  } catch (err) {
    throw new OvsnetError('ENDPOINT_INVALID', `${field} ${JSON.stringify(cidr)}: ${err instanceof CidrError ? err.message : String(err)}`);
  }
}

/**
 * A locally administered unicast MAC: 02:42 + the IPv4 address, as Docker's bridge driver
 * makes them (stable and readable), or random when the endpoint has no IPv4 address.
 */
export function macFor(address: string): string {
  const bytes =
    address === ''
      ? Buffer.concat([Buffer.from([0x02]), randomBytes(5)])
      : Buffer.concat([Buffer.from([0x02, 0x42]), parseCidrAddress(address, 'Interface.Address').bytes]);
  return [...bytes].map((b) => b.toString(16).padStart(2, '0')).join(':');
}
