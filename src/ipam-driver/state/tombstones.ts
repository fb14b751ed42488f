/**
 * Tombstones: the addresses DeleteEndpoint freed in its own transaction (the endpoint record
 * deleted, the reservation deleted, the pool's count or block moved, and this key written, all
 * at once), waiting for Docker's ReleaseAddress of them. Docker sends that release right after
 * DeleteEndpoint; by then the address may already be someone else's (a RequestAddress in
 * between), so the release must free nothing: it consumes the tombstone instead, from memory,
 * with no store call. A tombstone is durable, so a restart between the two calls loses nothing
 * (load() reads this host's at start). Consumed and expired tombstones are deleted by writes
 * that run anyway (the next DeleteEndpoint's transaction; else a sweep once a while), so the
 * common path costs no transaction of its own.
 *
 * One key per pool, address and endpoint (store/keys.ts), so a sweep deleting a consumed one
 * never deletes a newer tombstone of the same address. A tombstone whose release never came
 * (Docker stopped between the calls) expires after TOMBSTONE_TTL_MS: a release after that is
 * Docker's usual release (release.ts).
 */
import { del, put, type Op, type Store } from '../../store/types.js';
import { decodeAll, decodeRecord } from '../../store/decode.js';
import { ipamKeys } from './ipam-keys.js';

/** How long a tombstone waits for its ReleaseAddress (Docker sends it within milliseconds). */
export const TOMBSTONE_TTL_MS = 10 * 60_000;

/** How many consumed tombstones one transaction deletes at most. */
const SWEEP_BATCH = 64;

export interface Tombstone {
  readonly poolId: string;
  readonly address: string;
  readonly endpoint: string;
  readonly host: string;
  /** When DeleteEndpoint freed it (ISO 8601). */
  readonly at: string;
}

const keyOf = (t: Tombstone) => ipamKeys.tombstone(t.poolId, t.address, t.endpoint);

export const tombstoneTxn = {
  put: (t: Tombstone): Op => put(keyOf(t), JSON.stringify(t)),
};

/** Deletes of tombstone keys taken for one transaction; `failed` puts them back when it did not apply. */
export interface Sweep {
  readonly ops: readonly Op[];
  failed(): void;
}

export class Tombstones {
  /** Live tombstones by key, oldest first. */
  private readonly live = new Map<string, Tombstone>();
  /** Keys of consumed or expired tombstones still in the store. */
  private readonly pending = new Set<string>();

  constructor(
    private readonly host: string,
    private readonly now: () => Date,
  ) {}

  /** This host's tombstones in the store (start-up): those not expired are live, the rest swept. */
  async load(store: Store): Promise<void> {
    const { kvs } = await store.list(ipamKeys.allTombstones);
    const found = decodeAll(kvs, (kv) => ({ key: kv.key, t: decodeRecord<Tombstone>(kv.key, kv.value) }));
    for (const { key, t } of found.sort((a, b) => a.t.at.localeCompare(b.t.at))) {
      if (t.host !== this.host) continue;
      if (key !== keyOf(t))
        this.pending.add(key); // not a tombstone as written here: swept, never trusted
      else this.live.set(key, t);
    }
    this.expire();
  }

  /** A tombstone its transaction wrote. */
  add(t: Tombstone): void {
    this.live.set(keyOf(t), t);
  }

  /**
   * Consumes the oldest live tombstone of the address: true when there was one (the release is
   * DeleteEndpoint's, already done). Memory only; the key goes with a later sweep.
   */
  take(poolId: string, address: string): boolean {
    this.expire();
    for (const [key, t] of this.live) {
      if (t.poolId !== poolId || t.address !== address) continue;
      this.live.delete(key);
      this.pending.add(key);
      return true;
    }
    return false;
  }

  /** Forgets a released pool's tombstones (its transaction deleted their keys). */
  forgetPool(poolId: string): void {
    const prefix = ipamKeys.tombstones(poolId);
    for (const key of this.live.keys()) if (key.startsWith(prefix)) this.live.delete(key);
    for (const key of this.pending) if (key.startsWith(prefix)) this.pending.delete(key);
  }

  /** Live tombstones (status, tests). */
  get size(): number {
    return this.live.size;
  }

  /** Keys waiting for a sweep. */
  get sweepable(): number {
    this.expire();
    return this.pending.size;
  }

  /** Takes up to SWEEP_BATCH keys to delete in a transaction the caller runs anyway. */
  sweep(): Sweep {
    this.expire();
    const keys = [...this.pending].slice(0, SWEEP_BATCH);
    for (const k of keys) this.pending.delete(k);
    return {
      ops: keys.map((k) => del(k)),
      failed: () => keys.forEach((k) => this.pending.add(k)),
    };
  }

  /** Runs a transaction of its own for what is waiting (the periodic sweep). */
  async sweepNow(store: Store): Promise<void> {
    const s = this.sweep();
    if (s.ops.length === 0) return;
    try {
      await store.txn({ compares: [], success: [...s.ops] });
    } catch (err) {
      s.failed();
      throw err;
    }
  }

  private expire(): void {
    const oldest = this.now().getTime() - TOMBSTONE_TTL_MS;
    for (const [key, t] of this.live) {
      const at = Date.parse(t.at);
      if (Number.isFinite(at) && at >= oldest) break; // oldest first: the rest are younger
      this.live.delete(key);
      this.pending.add(key);
    }
  }
}
