/**
 * Whether an endpoint's record exists, for the IPAM's guard on Docker's ReleaseAddress
 * (ipam-driver/allocation/release-guard.ts): an address bound to an endpoint whose record
 * exists is not freed by a late release. Answered without a store call for every endpoint this
 * process created (the record cache holds it) or deleted (remembered here: Docker never reuses
 * an endpoint ID, so a deleted one stays deleted unless CreateEndpoint writes it again); any
 * other (one of an earlier run of ovsnet) is read from the store, in this host's networks whose
 * subnets hold the address: the endpoint a releasable reservation is bound to is this host's.
 */
import { containsAddress, parseAddress, parseCidr } from '../../lib/cidr.js';
import type { EndpointRecord, NetworkRecord } from '../model/records.js';

/** How many deleted endpoint IDs are remembered (the oldest go first: then they are read). */
const GONE_LIMIT = 4096;

export class GoneEndpoints {
  private readonly ids = new Set<string>();

  /** Its record was deleted by this process. */
  add(endpointId: string): void {
    this.ids.delete(endpointId);
    this.ids.add(endpointId);
    if (this.ids.size > GONE_LIMIT) this.ids.delete(this.ids.values().next().value ?? '');
  }

  /** Its record was written (again) by this process. */
  delete(endpointId: string): void {
    this.ids.delete(endpointId);
  }

  has(endpointId: string): boolean {
    return this.ids.has(endpointId);
  }
}

/** Whether the network's subnets hold `address` (plain form); every network when it is not an address. */
function holds(network: NetworkRecord, address: string): boolean {
  let parsed: ReturnType<typeof parseAddress>;
  try {
    parsed = parseAddress(address);
  } catch {
    return true;
  }
  return [...network.ipv4, ...network.ipv6].some((d) => {
    try {
      return containsAddress(parseCidr(d.pool), parsed.family, parsed.value);
    } catch {
      return false;
    }
  });
}

/** Whether `read` finds the endpoint's record in one of `networks` (this host's) whose subnets hold `address`. */
export async function findEndpoint(
  networks: readonly NetworkRecord[],
  address: string,
  read: (networkId: string) => Promise<EndpointRecord | undefined>,
): Promise<boolean> {
  for (const n of networks) if (holds(n, address) && (await read(n.networkId)) !== undefined) return true;
  return false;
}
