/**
 * The key layout, in one place, under a versioned prefix. A change of layout gets a new
 * version (/ovsnet/v2/...) and a migration, never an in-place reinterpretation.
 *
 * Key parts are escaped so that a value containing '/' (a CIDR) stays one part.
 */

const ROOT = '/ovsnet/v1/';

/** Escapes '/' and '%' so a part never splits; readable for CIDRs ("10.0.0.0%2F24"). */
export function part(value: string): string {
  // Most parts (IDs, addresses) hold neither: they are their own part, no copy made (every key built per call went through two replaces).
  if (!value.includes('%') && !value.includes('/')) return value;
  return value.replace(/%/g, '%25').replace(/\//g, '%2F');
}

export function unpart(value: string): string {
  if (!value.includes('%')) return value;
  return value.replace(/%2F/g, '/').replace(/%25/g, '%');
}

/** The first key after every key that starts with `prefix` (etcd's range_end for a prefix). */
export function prefixEnd(prefix: string): string {
  if (prefix === '') return '\0';
  const last = prefix.charCodeAt(prefix.length - 1);
  return prefix.slice(0, -1) + String.fromCharCode(last + 1);
}

export const keys = {
  root: ROOT,
  /** Read (count only) for the store's current revision: any key would do. */
  health: `${ROOT}health`,

  /** IPAM pools: one record per pool, keyed by PoolID. */
  pools: `${ROOT}ipam/pools/`,
  pool: (poolId: string) => `${ROOT}ipam/pools/${part(poolId)}`,

  /** IPAM reservations: one record per address, keyed by pool and address. */
  addresses: (poolId: string) => `${ROOT}ipam/addresses/${part(poolId)}/`,
  address: (poolId: string, address: string) => `${ROOT}ipam/addresses/${part(poolId)}/${part(address)}`,
  allAddresses: `${ROOT}ipam/addresses/`,

  /** Per-pool allocated-address count (moves only on a new reservation or a real release). */
  poolCount: (poolId: string) => `${ROOT}ipam/counts/${part(poolId)}`,

  /**
   * Blocks of pools shared by a logical network: a record per block (keyed by its first
   * address) holding its owner and its reserved-address count (shared pools count per block, so
   * hosts never contend on one count key).
   */
  blocks: (poolId: string) => `${ROOT}ipam/blocks/${part(poolId)}/`,
  block: (poolId: string, start: string) => `${ROOT}ipam/blocks/${part(poolId)}/${part(start)}`,
  allBlocks: `${ROOT}ipam/blocks/`,

  /**
   * Sticky pools (--ipam-opt ovsnet.sticky=true): the address a holder key last held, kept after
   * its release so that the key gets it back while it is free (ipam-driver/state/holder-keys.ts stickyKeyOf).
   */
  sticky: (poolId: string) => `${ROOT}ipam/sticky/${part(poolId)}/`,
  stickyKey: (poolId: string, holder: string) => `${ROOT}ipam/sticky/${part(poolId)}/${part(holder)}`,
  allSticky: `${ROOT}ipam/sticky/`,

  /**
   * Tombstones: an address DeleteEndpoint freed with the endpoint's record, until Docker's
   * ReleaseAddress of it (ipam-driver/state/tombstones.ts): one key per endpoint and address.
   */
  tombstones: (poolId: string) => `${ROOT}ipam/tombstones/${part(poolId)}/`,
  tombstone: (poolId: string, address: string, endpointId: string) =>
    `${ROOT}ipam/tombstones/${part(poolId)}/${part(address)}/${part(endpointId)}`,
  allTombstones: `${ROOT}ipam/tombstones/`,

  /** Everything of IPAM, watched as one prefix. */
  ipam: `${ROOT}ipam/`,
  /** Bumped by every pool creation or release in an address space: serialises overlap checks. */
  space: (addressSpace: string) => `${ROOT}ipam/spaces/${part(addressSpace)}`,
  /** Where the search for the next dynamic pool of a family resumes. */
  poolCursor: (family: 4 | 6) => `${ROOT}ipam/cursor/v${family}`,

  /** Networks and endpoints of the network driver, keyed by Docker's IDs. */
  networks: `${ROOT}networks/`,
  network: (networkId: string) => `${ROOT}networks/${part(networkId)}`,
  /** Every endpoint record, of every network. */
  allEndpoints: `${ROOT}endpoints/`,
  endpoints: (networkId: string) => `${ROOT}endpoints/${part(networkId)}/`,
  endpoint: (networkId: string, endpointId: string) => `${ROOT}endpoints/${part(networkId)}/${part(endpointId)}`,

  /** Segment tags held by networks: VLAN tags (1-4094) per host, VNIs for the cluster. */
  tags: `${ROOT}tags/`,
  vlanTags: (host: string) => `${ROOT}tags/vlan/${part(host)}/`,
  vlanTag: (host: string, tag: number) => `${ROOT}tags/vlan/${part(host)}/${tag}`,
  tag: (kind: 'vni' | 'uplink-vlan', tag: number) => `${ROOT}tags/${kind}/${tag}`,
  clusterTags: (kind: 'vni' | 'uplink-vlan') => `${ROOT}tags/${kind}/`,

  /** Logical networks (-o ovsnet.network=NAME): one record each, what every host agrees on. */
  logicalNetworks: `${ROOT}logical/`,
  logicalNetwork: (name: string) => `${ROOT}logical/${part(name)}`,
  /**
   * Their members, a small key each (layout 2; layout 1 kept them inside the record): a join
   * or leave writes one of these, so every host receives a few hundred bytes per change.
   */
  allLogicalMembers: `${ROOT}logical-members/`,
  logicalMembers: (name: string) => `${ROOT}logical-members/${part(name)}/`,
  logicalMember: (name: string, host: string) => `${ROOT}logical-members/${part(name)}/${part(host)}`,

  /** Hosts whose registration vanished, with when a peer first saw it gone (reclaim grace). */
  departed: `${ROOT}departed/`,
  departedHost: (name: string) => `${ROOT}departed/${part(name)}`,

  /** CNI attachments (src/cni/attachments.ts): one per container and interface, per host. */
  cniAttachments: (host: string) => `${ROOT}cni/${part(host)}/`,
  cniAttachment: (host: string, containerId: string, ifname: string) => `${ROOT}cni/${part(host)}/${part(containerId)}/${part(ifname)}`,

  /** ovsnet trace across hosts (src/cluster/traces.ts): requests to a host, answers by request ID. */
  traceRequests: (host: string) => `${ROOT}traces/requests/${part(host)}/`,
  traceAnswer: (id: string) => `${ROOT}traces/answers/${part(id)}`,

  /** Hosts registered under a lease. */
  hosts: `${ROOT}hosts/`,
  host: (name: string) => `${ROOT}hosts/${part(name)}`,
} as const;
