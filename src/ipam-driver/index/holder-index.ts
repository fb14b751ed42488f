/**
 * The in-memory map of holders, per pool: which address each keyed holder holds, who holds each
 * address, and (sticky pools) the address each key last held. Loaded with the pool index from one
 * snapshot and kept current by the same watch (index-sync.ts); this process's own writes are
 * applied at once (note/forget), so a repeated request right after the first finds its address.
 * A hint, like the pool index: the store's create-if-absent on the address key decides, so an
 * address is never held by two keys whatever this map says.
 */
import type { KeyValue, WatchEvent } from '../../store/types.js';
import { holderOf, isKeyed } from '../state/holder-keys.js';
import { decodeReservation, decodeSticky, type Reservation, type StickyRecord } from '../state/records.js';
import { parseIpamKey } from '../state/ipam-keys.js';

interface PoolHolders {
  /** Keyed holder -> address. */
  readonly byHolder: Map<string, string>;
  /** Address -> holder key (every reservation). */
  readonly byAddress: Map<string, string>;
  /** Sticky key -> the address it last held. */
  readonly sticky: Map<string, StickyRecord>;
}

export class HolderIndex {
  private readonly pools = new Map<string, PoolHolders>();

  load(kvs: readonly KeyValue[]): void {
    this.pools.clear();
    for (const kv of kvs) this.apply({ type: 'put', kv });
  }

  /** One change of the store; a malformed record is skipped (the pool index reports it). */
  apply(event: WatchEvent): void {
    const p = parseIpamKey(event.kv.key);
    if (p.kind === 'pool') {
      if (event.type === 'delete') this.pools.delete(p.poolId);
      return;
    }
    if (p.kind !== 'address' && p.kind !== 'sticky') return;
    if (p.kind === 'sticky') {
      const sticky = this.of(p.poolId).sticky;
      if (event.type === 'delete') sticky.delete(p.holder);
      else {
        const record = decodeSticky(event.kv.value);
        if (record !== undefined) sticky.set(p.holder, record);
      }
      return;
    }
    if (event.type === 'delete') this.forget(p.poolId, p.address);
    else {
      try {
        this.note(decodeReservation(event.kv));
      } catch {
        // malformed: the pool index skips and reports it
      }
    }
  }

  /** A reservation made (or seen). */
  note(r: Reservation): void {
    const pool = this.of(r.poolId);
    const holder = holderOf(r);
    const before = pool.byAddress.get(r.address);
    if (before !== undefined && pool.byHolder.get(before) === r.address) pool.byHolder.delete(before);
    pool.byAddress.set(r.address, holder);
    if (isKeyed(holder)) pool.byHolder.set(holder, r.address);
  }

  /** A reservation gone. */
  forget(poolId: string, address: string): void {
    const pool = this.pools.get(poolId);
    if (pool === undefined) return;
    const holder = pool.byAddress.get(address);
    pool.byAddress.delete(address);
    if (holder !== undefined && pool.byHolder.get(holder) === address) pool.byHolder.delete(holder);
  }

  /** The address `holder` holds in the pool, if it is keyed and holds one. */
  addressOf(poolId: string, holder: string): string | undefined {
    return this.pools.get(poolId)?.byHolder.get(holder);
  }

  /** Who holds `address` of the pool, as last seen. */
  holderAt(poolId: string, address: string): string | undefined {
    return this.pools.get(poolId)?.byAddress.get(address);
  }

  /** The address `key` last held in a sticky pool, if remembered. */
  stickyOf(poolId: string, key: string): StickyRecord | undefined {
    return this.pools.get(poolId)?.sticky.get(key);
  }

  /** Every pool in which `holder` holds an address, with the address. */
  held(holder: string): { poolId: string; address: string }[] {
    const out: { poolId: string; address: string }[] = [];
    for (const [poolId, pool] of this.pools) {
      const address = pool.byHolder.get(holder);
      if (address !== undefined) out.push({ poolId, address });
    }
    return out;
  }

  /** The keyed holders of a pool whose key starts with `prefix` (e.g. 'cni/'), with their addresses. */
  inPool(poolId: string, prefix: string): { holder: string; address: string }[] {
    const pool = this.pools.get(poolId);
    return pool === undefined
      ? []
      : [...pool.byHolder].filter(([h]) => h.startsWith(prefix)).map(([holder, address]) => ({ holder, address }));
  }

  private of(poolId: string): PoolHolders {
    let pool = this.pools.get(poolId);
    if (pool === undefined) {
      pool = { byHolder: new Map(), byAddress: new Map(), sticky: new Map() };
      this.pools.set(poolId, pool);
    }
    return pool;
  }
}
