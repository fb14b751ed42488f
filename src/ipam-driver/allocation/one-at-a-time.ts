/**
 * A pool's reservations and releases in this process, one at a time. Each is a compare-and-swap
 * on the pool's count (one-host pools) or its block's record (shared pools); a storm of
 * concurrent requests would all pick the same free address and compare the same revision, one
 * winning and the rest trying again: n/2 store round trips per request for n at once. In turn,
 * each goes through at its first try: one round trip per request, and Docker's calls wait a
 * store round trip each at most. Other processes and hosts still race through the store's
 * compares, as before.
 */
import { KeyedLock } from '../../lib/locks.js';
import type { AddressStrategy } from './one-host-pool.js';

export function oneAtATime(inner: AddressStrategy, locks: KeyedLock): AddressStrategy {
  return {
    allocate: (pool, record) => locks.run(pool.record.poolId, () => inner.allocate(pool, record)),
    reserve: (pool, value, record) => locks.run(pool.record.poolId, () => inner.reserve(pool, value, record)),
    release: (pool, value, onlyIf) => locks.run(pool.record.poolId, () => inner.release(pool, value, onlyIf)),
    releasePart: (pool, value, json) => inner.releasePart(pool, value, json),
  };
}

/** Both kinds of pool behind one lock per pool (a pool shared later keeps its lock). */
export function inTurn(shared: AddressStrategy, local: AddressStrategy): { shared: AddressStrategy; local: AddressStrategy } {
  const locks = new KeyedLock();
  return { shared: oneAtATime(shared, locks), local: oneAtATime(local, locks) };
}
