/**
 * The embedded store: SQLite (better-sqlite3 12.x) in WAL mode, etcd's data model on top. One
 * write transaction (BEGIN IMMEDIATE) per store transaction, so two processes on one file
 * serialise their writes and a reader never sees half a transaction; a global revision in `meta`
 * moved by one per writing transaction; every change appended to `events` under its revision
 * (watches replay from there, and hear other processes' writes: write-watch.ts); leases in
 * `leases` with an absolute expiry, swept by any process. better-sqlite3 is synchronous: each
 * call holds the event loop for one SQLite transaction (tens of microseconds, plus a commit's
 * fsync). Schema and statements: sqlite-db.ts; transactions: sqlite-txn.ts; watches:
 * sqlite-watch.ts; this class ties them to the Store interface, leases and sweeps.
 */
import fs from 'node:fs';
import path from 'node:path';
import type Database from 'better-sqlite3';
import { OvsnetError, messageOf } from '../../lib/errors.js';
import { prefixEnd } from '../keys.js';
import type { KeyValue, LeaseId, RangeOptions, RangePage, Store, TxnRequest, TxnResult, WatchHandlers, Watcher } from '../types.js';
import { MAX_PAGE } from '../common.js';
import { currentRevision, openDatabase, prepareStatements, toKv, type Statements } from './sqlite-db.js';
import { applyTxn, expireLeases } from './sqlite-txn.js';
import { SqliteWatches } from './sqlite-watch.js';
import { watchWrites, type WriteWatch } from './write-watch.js';

export interface SqliteStoreOptions {
  readonly file: string;
  /** How long a writer waits for another process's lock before STORE_UNAVAILABLE. */
  readonly busyTimeoutMs?: number;
  /**
   * How often other processes' writes are looked for, for watches, besides hearing them as they
   * happen (write-watch.ts): POLL_MS unless said; FAST_POLL_MS when they cannot be heard.
   */
  readonly pollMs?: number;
  /** How often expired leases are swept. */
  readonly sweepMs?: number;
  /** Events kept for watches to resume from. */
  readonly historyRevisions?: number;
  /** Clock, for tests. */
  readonly now?: () => number;
}

/** The revision's poll while other processes' writes are heard as they happen: a safety net. */
export const POLL_MS = 1000;
/** The poll when they cannot be heard (no inotify). */
export const FAST_POLL_MS = 20;

export class SqliteStore implements Store {
  readonly kind = 'sqlite' as const;
  private readonly db: Database.Database;
  private readonly now: () => number;
  private readonly historyRevisions: number;
  private readonly watches: SqliteWatches;
  private closed = false;
  private readonly timers: NodeJS.Timeout[] = [];
  private poller: NodeJS.Timeout | undefined;
  private readonly writes: WriteWatch | undefined;
  private readonly s: Statements;

  constructor(options: SqliteStoreOptions) {
    this.now = options.now ?? Date.now;
    this.historyRevisions = options.historyRevisions ?? 10_000;
    try {
      fs.mkdirSync(path.dirname(options.file), { recursive: true });
      this.db = openDatabase(options.file, options.busyTimeoutMs ?? 5000);
    } catch (err) {
      throw new OvsnetError(
        'STORE_UNAVAILABLE',
        `cannot open the embedded store at ${options.file}: ${messageOf(err)} (OVSNET_STORE=sqlite:/absolute/path.db, a writable directory)`,
        { cause: err },
      );
    }
    this.s = prepareStatements(this.db);
    this.watches = new SqliteWatches(this.s);
    const sweep = setInterval(() => this.sweep(), options.sweepMs ?? 250);
    sweep.unref();
    this.timers.push(sweep);
    this.writes = watchWrites(
      options.file,
      () => this.dispatch(),
      () => this.poll(options.pollMs ?? FAST_POLL_MS),
    );
    this.poll(options.pollMs ?? (this.writes === undefined ? FAST_POLL_MS : POLL_MS));
  }

  /** Looks for other processes' writes every `ms` (replacing the poll there was). */
  private poll(ms: number): void {
    if (this.closed) return;
    clearInterval(this.poller);
    this.poller = setInterval(() => this.dispatch(), ms).unref();
  }

  get(key: string): Promise<KeyValue | undefined> {
    return this.guard(() => {
      const row = this.s.get.get(key);
      return row === undefined ? undefined : toKv(row);
    });
  }

  range(prefix: string, options: RangeOptions = {}): Promise<RangePage> {
    return this.guard(() =>
      this.db
        .transaction(() => {
          const limit = Math.min(options.limit ?? MAX_PAGE, MAX_PAGE);
          const rows = this.s.range.all(prefix, options.after ?? '', prefixEnd(prefix), limit + 1);
          const more = rows.length > limit;
          return { kvs: rows.slice(0, limit).map(toKv), more, revision: currentRevision(this.s) };
        })
        .deferred(),
    );
  }

  list(prefix: string): Promise<RangePage> {
    return this.guard(() =>
      this.db
        .transaction(() => ({
          kvs: this.s.rangeAll.all(prefix, prefixEnd(prefix)).map(toKv),
          more: false,
          revision: currentRevision(this.s),
        }))
        .deferred(),
    );
  }

  revision(): Promise<number> {
    return this.guard(() => currentRevision(this.s));
  }

  txn(request: TxnRequest): Promise<TxnResult> {
    return this.guard(() => {
      const result = this.db.transaction(() => applyTxn(this.s, request, this.now)).immediate();
      if (this.watches.behind(result.revision)) queueMicrotask(() => this.dispatch());
      return result;
    });
  }

  watch(prefix: string, fromRevision: number, handlers: WatchHandlers): Promise<Watcher> {
    return this.guard(() => this.watches.add(prefix, fromRevision, handlers));
  }

  grantLease(ttlSeconds: number): Promise<LeaseId> {
    return this.guard(() => {
      const id = this.db
        .transaction(() => {
          // Random 53-bit ids: unique across processes without a shared counter.
          let candidate: number;
          do candidate = Math.floor(Math.random() * Number.MAX_SAFE_INTEGER) + 1;
          while (this.s.lease.get(candidate) !== undefined);
          this.s.insertLease.run(candidate, ttlSeconds, this.now() + ttlSeconds * 1000);
          return candidate;
        })
        .immediate();
      return String(id);
    });
  }

  keepAlive(lease: LeaseId): Promise<void> {
    return this.guard(() => {
      this.db
        .transaction(() => {
          const row = this.s.lease.get(Number(lease));
          if (row === undefined || row.expires_at <= this.now()) {
            throw new OvsnetError('STORE_LEASE_NOT_FOUND', `lease ${lease} has expired or was revoked; grant a new one`);
          }
          this.s.renewLease.run(this.now() + row.ttl * 1000, row.id);
        })
        .immediate();
    });
  }

  revokeLease(lease: LeaseId): Promise<void> {
    return this.guard(() => {
      const rev = this.db.transaction(() => expireLeases(this.s, [Number(lease)])).immediate();
      if (this.watches.behind(rev)) queueMicrotask(() => this.dispatch());
    });
  }

  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    this.timers.forEach((t) => clearInterval(t));
    clearInterval(this.poller);
    this.writes?.close();
    const err = new OvsnetError('STORE_CLOSED', 'the store was closed');
    this.watches.endAll(err);
    this.db.close();
    return Promise.resolve();
  }

  // --- internals -------------------------------------------------------------------------

  private sweep(): void {
    if (this.closed) return;
    try {
      if (this.s.expired.all(this.now()).length > 0) {
        this.db
          .transaction(() =>
            expireLeases(
              this.s,
              this.s.expired.all(this.now()).map((r) => r.id),
            ),
          )
          .immediate();
      }
      const floor = currentRevision(this.s) - this.historyRevisions;
      if (floor > (this.s.compacted.get()?.value ?? 0)) {
        this.db
          .transaction(() => {
            this.s.compact.run(floor);
            this.s.setMeta.run(floor - 1, 'compacted');
          })
          .immediate();
      }
      this.dispatch();
    } catch {
      // Another process holds the write lock for longer than the busy timeout: the next sweep
      // (or that process) expires the leases.
    }
  }

  /** Delivers what was written since the last dispatch to the watches (every poll, and after a local write). */
  private dispatch(): void {
    if (!this.closed) this.watches.dispatch();
  }

  private guard<T>(fn: () => T): Promise<T> {
    if (this.closed) return Promise.reject(new OvsnetError('STORE_CLOSED', 'the store was closed'));
    try {
      return Promise.resolve(fn());
    } catch (err) {
      if (err instanceof OvsnetError) return Promise.reject(err);
      const busy = (err as { code?: string }).code?.startsWith('SQLITE_BUSY') === true;
      return Promise.reject(
        new OvsnetError(
          busy ? 'STORE_UNAVAILABLE' : 'STORE_CORRUPT',
          busy
            ? `the embedded store is locked by another process for too long: ${messageOf(err)}`
            : `the embedded store failed: ${messageOf(err)}`,
          { cause: err },
        ),
      );
    }
  }
}
