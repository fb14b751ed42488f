/**
 * The state store, on etcd's data model: keys with values, a global revision that every
 * write transaction moves by one, per-key create/mod revisions and versions, leases, and
 * watches that resume from a revision. Both backends (embedded SQLite, etcd) implement it;
 * test/store/contract.ts holds them to the same behaviour.
 *
 * Shaped so a Consul backend could follow: compares map to Consul's check-index / check-not-
 * exists verbs (mod revision ~ ModifyIndex), a watch to blocking queries on a prefix, leases
 * to sessions with a TTL and the "delete" behaviour.
 */

export type LeaseId = string;

export interface KeyValue {
  readonly key: string;
  readonly value: string;
  /** Revision of the transaction that created the key (since it last did not exist). */
  readonly createRevision: number;
  /** Revision of the last transaction that wrote the key. */
  readonly modRevision: number;
  /** Number of writes since creation; 1 after the first put. */
  readonly version: number;
  /** Lease the key is attached to, or '0' for none. */
  readonly lease: LeaseId;
}

export type CompareOp = '==' | '!=' | '<' | '>';

/** One condition of a transaction. An absent key has version 0, mod revision 0 and no value. */
export type Compare =
  | { readonly key: string; readonly target: 'absent' }
  | { readonly key: string; readonly target: 'present' }
  | { readonly key: string; readonly target: 'value'; readonly op: '==' | '!='; readonly value: string }
  | { readonly key: string; readonly target: 'version'; readonly op: CompareOp; readonly version: number }
  | { readonly key: string; readonly target: 'modRevision'; readonly op: CompareOp; readonly modRevision: number };

export type Op =
  | { readonly type: 'put'; readonly key: string; readonly value: string; readonly lease?: LeaseId }
  | { readonly type: 'delete'; readonly key: string }
  | { readonly type: 'deletePrefix'; readonly prefix: string }
  | { readonly type: 'get'; readonly key: string };

export interface TxnRequest {
  readonly compares: readonly Compare[];
  readonly success: readonly Op[];
  readonly failure?: readonly Op[];
}

export interface TxnResult {
  readonly succeeded: boolean;
  /** Store revision after the transaction (unchanged when it wrote nothing). */
  readonly revision: number;
  /** One entry per `get` op of the branch that ran, in order: the key's value or undefined. */
  readonly gets: readonly (KeyValue | undefined)[];
}

export interface RangePage {
  readonly kvs: readonly KeyValue[];
  /** True when keys after the last one returned remain. */
  readonly more: boolean;
  /** The store revision the page was read at. */
  readonly revision: number;
}

export interface RangeOptions {
  /** Page size; default and maximum 1000. */
  readonly limit?: number;
  /** Return keys strictly after this one (the last key of the previous page). */
  readonly after?: string;
}

export interface WatchEvent {
  readonly type: 'put' | 'delete';
  /** For a delete: key, value '' and modRevision = the revision of the delete. */
  readonly kv: KeyValue;
}

export interface Watcher {
  /** Stops delivery; idempotent. */
  close(): Promise<void>;
}

export interface WatchHandlers {
  /** Events of one revision, in order; called in revision order, each event exactly once. */
  readonly onEvents: (events: readonly WatchEvent[]) => void;
  /** The watch cannot continue (history compacted, store closed); no more events follow. */
  readonly onError?: (err: Error) => void;
}

export interface Store {
  /** Which backend, for status output and logs. */
  readonly kind: 'sqlite' | 'etcd';

  get(key: string): Promise<KeyValue | undefined>;

  /** One page of the keys under a prefix, in key order. */
  range(prefix: string, options?: RangeOptions): Promise<RangePage>;

  /** Every key under a prefix, read as one snapshot (one revision). */
  list(prefix: string): Promise<RangePage>;

  /** Compares, then the success or failure ops, atomically. */
  txn(request: TxnRequest): Promise<TxnResult>;

  /**
   * Watch a prefix starting at `fromRevision` (inclusive): a read at revision R followed by a
   * watch from R + 1 misses nothing. Fails with STORE_COMPACTED when that history is gone.
   */
  watch(prefix: string, fromRevision: number, handlers: WatchHandlers): Promise<Watcher>;

  /** A lease with this TTL; keys put under it vanish when it expires or is revoked. */
  grantLease(ttlSeconds: number): Promise<LeaseId>;
  /** Renews the lease for another TTL; STORE_LEASE_NOT_FOUND if it already expired. */
  keepAlive(lease: LeaseId): Promise<void>;
  /** Revokes the lease and deletes its keys; idempotent. */
  revokeLease(lease: LeaseId): Promise<void>;

  /** Current revision of the store. */
  revision(): Promise<number>;

  /** Releases connections and timers; idempotent. */
  close(): Promise<void>;
}

/** Convenience constructors for transactions. */
export const put = (key: string, value: string, lease?: LeaseId): Op =>
  lease === undefined ? { type: 'put', key, value } : { type: 'put', key, value, lease };
export const del = (key: string): Op => ({ type: 'delete', key });
export const get = (key: string): Op => ({ type: 'get', key });
export const absent = (key: string): Compare => ({ key, target: 'absent' });
export const modRevisionIs = (key: string, modRevision: number): Compare => ({
  key,
  target: 'modRevision',
  op: '==',
  modRevision,
});
