/**
 * IPAM's keys in the store (the ipam/ family of store/keys.ts): built and parsed here and in
 * the other modules of state/ only. The rest of IPAM works on typed records, reads
 * (ipam-reads.ts) and transaction parts (ipam-txn.ts).
 */
import { keys, unpart } from '../../store/keys.js';

/** Everything of IPAM, followed as one prefix (index-sync.ts). */
export const IPAM_PREFIX = keys.ipam;

/** Key builders, for state/ only. */
export const ipamKeys = {
  pools: keys.pools,
  pool: keys.pool,
  reservations: keys.addresses,
  reservation: keys.address,
  allReservations: keys.allAddresses,
  count: keys.poolCount,
  counts: `${keys.ipam}counts/`,
  blocks: keys.blocks,
  block: keys.block,
  allBlocks: keys.allBlocks,
  sticky: keys.sticky,
  stickyKey: keys.stickyKey,
  allSticky: keys.allSticky,
  space: keys.space,
  cursor: keys.poolCursor,
  tombstones: keys.tombstones,
  tombstone: keys.tombstone,
  allTombstones: keys.allTombstones,
} as const;

/** What a key under IPAM_PREFIX names. */
export type IpamKey =
  | { readonly kind: 'pool'; readonly poolId: string }
  | { readonly kind: 'address'; readonly poolId: string; readonly address: string }
  | { readonly kind: 'count'; readonly poolId: string }
  | { readonly kind: 'block'; readonly poolId: string; readonly start: string }
  | { readonly kind: 'sticky'; readonly poolId: string; readonly holder: string }
  | { readonly kind: 'other' };

/** Parses a key of a snapshot or watch event of IPAM_PREFIX; 'other' for anything else. */
export function parseIpamKey(key: string): IpamKey {
  if (!key.startsWith(IPAM_PREFIX)) return { kind: 'other' };
  const rest = key.slice(IPAM_PREFIX.length).split('/');
  const [section, a, b] = rest;
  if (a === undefined) return { kind: 'other' };
  if (rest.length === 2) {
    if (section === 'pools') return { kind: 'pool', poolId: unpart(a) };
    if (section === 'counts') return { kind: 'count', poolId: unpart(a) };
  }
  if (b === undefined || rest.length !== 3) return { kind: 'other' };
  if (section === 'addresses') return { kind: 'address', poolId: unpart(a), address: unpart(b) };
  if (section === 'blocks') return { kind: 'block', poolId: unpart(a), start: unpart(b) };
  if (section === 'sticky') return { kind: 'sticky', poolId: unpart(a), holder: unpart(b) };
  return { kind: 'other' };
}
