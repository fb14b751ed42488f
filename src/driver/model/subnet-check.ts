/**
 * CreateNetwork's subnets, whichever IPAM chose them (ovsnet's, Docker's default, another
 * plugin): the driver parses IPv4Data/IPv6Data itself, since their pools become the gateway
 * port's prefix, the host's routes and the masquerade rules. subnets.ts holds the rules.
 */
import { formatPrefix } from '../../lib/cidr.js';
import {
  ALLOW_CONNECTED,
  checkGateway,
  checkHostOverlap,
  checkSubnet,
  DEFAULT_MIN_PREFIX,
  parseSubnet,
  type HostNet,
  type MinPrefix,
} from '../../lib/subnets.js';
import { OvsnetError } from '../../lib/errors.js';
import type { IpData } from './records.js';

/** What the rules need from the host: OVSNET_MIN_PREFIX and the host's addresses and routes. */
export interface SubnetRules {
  readonly minPrefix: MinPrefix;
  readonly hostNets: () => readonly HostNet[];
}

/** No host segments known (unit tests without a host): the pure rules still apply. */
const NO_HOST: SubnetRules = { minPrefix: DEFAULT_MIN_PREFIX, hostNets: () => [] };

/**
 * Refuses the network when a pool breaks a rule, a gateway lies outside its pool or has another
 * prefix length, or (unless `-o ovsnet.allow-connected=true`) a pool overlaps the host's own
 * segments. Pure apart from reading the host's segments.
 */
export function checkNetworkSubnets(
  data: { readonly ipv4: readonly IpData[]; readonly ipv6: readonly IpData[] },
  allowConnected: boolean,
  rules: SubnetRules = NO_HOST,
): void {
  const host = allowConnected ? [] : rules.hostNets();
  for (const [family, list] of [
    [4, data.ipv4],
    [6, data.ipv6],
  ] as const) {
    for (const d of list) {
      const field = `IPv${family}Data.Pool`;
      const pool = parseSubnet(d.pool, field);
      if (pool.family !== family) {
        throw new OvsnetError(
          'SUBNET_INVALID',
          `${field} ${d.pool} is not an IPv${family} subnet: give IPv${family} pools in IPv${family}Data`,
        );
      }
      checkSubnet(pool, field, rules.minPrefix);
      if (d.gateway !== undefined) checkGateway(d.gateway, pool, `IPv${family}Data.Gateway (--gateway) of ${formatPrefix(pool)}`);
      checkHostOverlap(pool, `subnet`, host, `-o ${ALLOW_CONNECTED}=true`);
    }
  }
}
