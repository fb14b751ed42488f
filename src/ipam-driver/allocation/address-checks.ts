/**
 * Checking an address a request names against its pool: pure, no I/O. The messages say what
 * is wrong with the address and which one to pick instead.
 */
import { CidrError, containsAddress, formatAddress, parseAddress, parseCidr, size, type Family } from '../../lib/cidr.js';
import { OvsnetError } from '../../lib/errors.js';
import type { PoolState } from '../index/pool-index.js';

/** `address` (plain or CIDR form) as a value inside `pool`; IPAM_ADDRESS_INVALID otherwise. */
export function addressIn(pool: PoolState, address: string): bigint {
  let parsed: { family: Family; value: bigint };
  try {
    if (address.includes('/')) {
      const c = parseCidr(address);
      parsed = { family: c.family, value: c.address };
    } else {
      parsed = parseAddress(address);
    }
  } catch (err) {
    throw new OvsnetError('IPAM_ADDRESS_INVALID', err instanceof CidrError ? err.message : String(err));
  }
  if (!containsAddress(pool.prefix, parsed.family, parsed.value)) {
    throw new OvsnetError('IPAM_ADDRESS_INVALID', `address ${address} is not in pool ${pool.record.pool}: pick one inside it`);
  }
  return parsed.value;
}

/**
 * An address asked for by value (a gateway, --ip, --aux-address): in the pool, and neither its
 * network address (unless the gateway) nor an IPv4 broadcast address, when the pool has those.
 */
export function checkRequested(pool: PoolState, address: string, gateway: boolean): bigint {
  const value = addressIn(pool, address);
  const hostBits = (pool.prefix.family === 4 ? 32 : 128) - pool.prefix.bits;
  if (hostBits >= 2 && !gateway && value === pool.prefix.base) {
    throw new OvsnetError(
      'IPAM_ADDRESS_INVALID',
      `address ${address} is the network address of ${pool.record.pool}; pick one from ${formatAddress(pool.prefix.family, pool.prefix.base + 1n)} on`,
    );
  }
  if (hostBits >= 2 && pool.prefix.family === 4 && value === pool.prefix.base + size(pool.prefix) - 1n) {
    throw new OvsnetError('IPAM_ADDRESS_INVALID', `address ${address} is the broadcast address of ${pool.record.pool}; pick one below it`);
  }
  return value;
}
