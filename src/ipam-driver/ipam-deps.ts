/** What the IPAM (ipam.ts) is given by the composition root (daemon/assemble.ts). */
import type { PoolsDeps } from './pools/pools.js';
import type { EndpointExists } from './allocation/release-guard.js';

export interface IpamDeps extends Omit<PoolsDeps, 'now'> {
  /** How long a request waits for the first load of the index. */
  readonly readyTimeoutMs: number;
  /** OVSNET_JOURNAL: where unconfirmed changes outlive a restart ('' or absent: memory only). */
  readonly journal?: string;
  /** unconfirmed.ts: how long a second look waits after a first that found nothing (default 5 s). */
  readonly doubtConfirmMs?: number;
  /** OVSNET_SCOPE=global: a swarm node, whose GlobalDefault pools are swarm networks' (refused). */
  readonly swarmScope?: boolean;
  /**
   * Whether an endpoint's record exists, answered by the network driver's records: Docker's
   * release keeps an address bound to such an endpoint (allocation/release-guard.ts). Absent: no
   * such guard (an IPAM without a driver beside it).
   */
  readonly endpointExists?: EndpointExists;
}
