/**
 * The embedded store: SQLite (better-sqlite3 12.x) in WAL mode, etcd's data model on top.
 *
 * - One SQLite write transaction (BEGIN IMMEDIATE) per store transaction, so two processes
 *   opening the same file serialise their writes; a reader never sees half a transaction.
 * - A global revision in `meta`, moved by one per transaction that wrote something.
 * - Every change is appended to `events` under its revision; watches replay from there and
 *   poll the revision (cheap, one indexed read) to see other processes' writes.
 * - Leases live in `leases` with an absolute expiry; any process sweeps expired ones.
 *
 * better-sqlite3 is synchronous: each call holds the event loop for the length of one SQLite
 * transaction (tens of microseconds, plus the fsync of a commit).
 */
import fs from 'node:fs';
import path from 'node:path';
import type Database from 'better-sqlite3';
import { OvsnetError, messageOf } from '../errors.js';
import { prefixEnd } from './keys.js';
import type {
  Compare,
  KeyValue,
  LeaseId,
  Op,
  RangeOptions,
  RangePage,
  Store,
  TxnRequest,
  TxnResult,
  WatchEvent,
  WatchHandlers,
  Watcher,
} from './types.js';
import { compareNumbers, MAX_PAGE } from './common.js';
import { groupByRevision, openDatabase, toKv, type EventRow, type Row } from './sqlite-db.js';

export interface SqliteStoreOptions {
  readonly file: string;
  /** How long a writer waits for another process's lock before STORE_UNAVAILABLE. */
  readonly busyTimeoutMs?: number;
  /** How often other processes' writes are looked for, for watches. */
  readonly pollMs?: number;
  /** How often expired leases are swept. */
  readonly sweepMs?: number;
  /** Events kept for watches to resume from. */
  readonly historyRevisions?: number;
  /** Clock, for tests. */
  readonly now?: () => number;
}

interface LocalWatcher {
  /** First revision this watcher wants. */
  from: number;
  prefix: string;
  end: string;
  handlers: WatchHandlers;
  closed: boolean;
}

export class SqliteStore implements Store {
  readonly kind = 'sqlite' as const;
  private readonly db: Database.Database;
  private readonly now: () => number;
  private readonly historyRevisions: number;
  private readonly watchers = new Set<LocalWatcher>();
  /** Highest revision whose events have been dispatched to watchers. */
  private dispatched: number;
  private closed = false;
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly s;

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
    const db = this.db;
    this.s = {
      rev: db.prepare<[], { value: number }>(`SELECT value FROM meta WHERE name = 'revision'`),
      compacted: db.prepare<[], { value: number }>(`SELECT value FROM meta WHERE name = 'compacted'`),
      setMeta: db.prepare<[number, string]>(`UPDATE meta SET value = ? WHERE name = ?`),
      get: db.prepare<[string], Row>(`SELECT * FROM kv WHERE key = ?`),
      range: db.prepare<[string, string, string, number], Row>(
        `SELECT * FROM kv WHERE key >= ? AND key > ? AND key < ? ORDER BY key LIMIT ?`,
      ),
      rangeAll: db.prepare<[string, string], Row>(`SELECT * FROM kv WHERE key >= ? AND key < ? ORDER BY key`),
      upsert: db.prepare<[string, string, number, number, number, number]>(
        `INSERT OR REPLACE INTO kv (key, value, create_rev, mod_rev, version, lease) VALUES (?, ?, ?, ?, ?, ?)`,
      ),
      delete: db.prepare<[string]>(`DELETE FROM kv WHERE key = ?`),
      keysInRange: db.prepare<[string, string], Row>(`SELECT * FROM kv WHERE key >= ? AND key < ?`),
      event: db.prepare<[number, number, number, string, string, number, number, number, number]>(
        `INSERT INTO events (rev, seq, type, key, value, create_rev, mod_rev, version, lease) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      eventsSince: db.prepare<[number, number], EventRow>(
        `SELECT * FROM events WHERE rev > ? AND rev <= ? ORDER BY rev, seq`,
      ),
      compact: db.prepare<[number]>(`DELETE FROM events WHERE rev < ?`),
      lease: db.prepare<[number], { id: number; ttl: number; expires_at: number }>(`SELECT * FROM leases WHERE id = ?`),
      insertLease: db.prepare<[number, number, number]>(`INSERT INTO leases (id, ttl, expires_at) VALUES (?, ?, ?)`),
      renewLease: db.prepare<[number, number]>(`UPDATE leases SET expires_at = ? WHERE id = ?`),
      deleteLease: db.prepare<[number]>(`DELETE FROM leases WHERE id = ?`),
      leaseKeys: db.prepare<[number], Row>(`SELECT * FROM kv WHERE lease = ?`),
      expired: db.prepare<[number], { id: number }>(`SELECT id FROM leases WHERE expires_at <= ?`),
    };
    this.dispatched = this.currentRevision();
    const poll = setInterval(() => this.dispatch(), options.pollMs ?? 20);
    const sweep = setInterval(() => this.sweep(), options.sweepMs ?? 250);
    poll.unref();
    sweep.unref();
    this.timers.push(poll, sweep);
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
          return { kvs: rows.slice(0, limit).map(toKv), more, revision: this.currentRevision() };
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
          revision: this.currentRevision(),
        }))
        .deferred(),
    );
  }

  revision(): Promise<number> {
    return this.guard(() => this.currentRevision());
  }

  txn(request: TxnRequest): Promise<TxnResult> {
    return this.guard(() => {
      const result = this.db.transaction(() => this.applyTxn(request)).immediate();
      if (result.revision > this.dispatched) queueMicrotask(() => this.dispatch());
      return result;
    });
  }

  watch(prefix: string, fromRevision: number, handlers: WatchHandlers): Promise<Watcher> {
    return this.guard(() => {
      const compacted = this.s.compacted.get()?.value ?? 0;
      if (fromRevision <= compacted) {
        throw new OvsnetError(
          'STORE_COMPACTED',
          `cannot watch ${prefix} from revision ${fromRevision}: history before ${compacted + 1} is compacted; read again and watch from the read's revision + 1`,
        );
      }
      const watcher: LocalWatcher = { from: fromRevision, prefix, end: prefixEnd(prefix), handlers, closed: false };
      // Catch up synchronously to the dispatcher's cursor; later revisions come from dispatch().
      // Nothing can run in between (single thread), so no revision is missed or seen twice.
      const backlog = this.s.eventsSince.all(Math.max(fromRevision - 1, compacted), this.dispatched);
      this.watchers.add(watcher);
      const batches = groupByRevision(backlog.filter((e) => inRange(e, watcher)));
      if (batches.length > 0) queueMicrotask(() => batches.forEach((b) => this.deliver(watcher, b)));
      return {
        close: () => {
          watcher.closed = true;
          this.watchers.delete(watcher);
          return Promise.resolve();
        },
      };
    });
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
      const rev = this.db.transaction(() => this.expireLeases([Number(lease)])).immediate();
      if (rev > this.dispatched) queueMicrotask(() => this.dispatch());
    });
  }

  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    this.timers.forEach((t) => clearInterval(t));
    const err = new OvsnetError('STORE_CLOSED', 'the store was closed');
    for (const w of this.watchers) w.handlers.onError?.(err);
    this.watchers.clear();
    this.db.close();
    return Promise.resolve();
  }

  // --- internals -------------------------------------------------------------------------

  private currentRevision(): number {
    return this.s.rev.get()?.value ?? 1;
  }

  private applyTxn(request: TxnRequest): TxnResult {
    const rev = this.currentRevision();
    const next = rev + 1;
    const succeeded = request.compares.every((c) => this.evaluate(c));
    const ops = succeeded ? request.success : (request.failure ?? []);
    const gets: (KeyValue | undefined)[] = [];
    let seq = 0;
    for (const op of ops) seq = this.applyOp(op, next, seq, gets);
    if (seq > 0) this.s.setMeta.run(next, 'revision');
    return { succeeded, revision: seq > 0 ? next : rev, gets };
  }

  private applyOp(op: Op, next: number, seq: number, gets: (KeyValue | undefined)[]): number {
    switch (op.type) {
      case 'get': {
        const row = this.s.get.get(op.key);
        gets.push(row === undefined ? undefined : toKv(row));
        return seq;
      }
      case 'put': {
        const lease = op.lease === undefined ? 0 : Number(op.lease);
        if (lease !== 0) {
          const l = this.s.lease.get(lease);
          if (l === undefined || l.expires_at <= this.now()) {
            throw new OvsnetError('STORE_LEASE_NOT_FOUND', `cannot put ${op.key} under lease ${op.lease}: it has expired or was revoked`);
          }
        }
        const old = this.s.get.get(op.key);
        const createRev = old?.create_rev ?? next;
        const version = (old?.version ?? 0) + 1;
        this.s.upsert.run(op.key, op.value, createRev, next, version, lease);
        this.s.event.run(next, seq, 0, op.key, op.value, createRev, next, version, lease);
        return seq + 1;
      }
      case 'delete': {
        const old = this.s.get.get(op.key);
        if (old === undefined) return seq;
        this.s.delete.run(op.key);
        this.s.event.run(next, seq, 1, op.key, '', old.create_rev, next, 0, 0);
        return seq + 1;
      }
      case 'deletePrefix': {
        for (const old of this.s.keysInRange.all(op.prefix, prefixEnd(op.prefix))) {
          this.s.delete.run(old.key);
          this.s.event.run(next, seq++, 1, old.key, '', old.create_rev, next, 0, 0);
        }
        return seq;
      }
    }
  }

  private evaluate(c: Compare): boolean {
    const row = this.s.get.get(c.key);
    switch (c.target) {
      case 'absent':
        return row === undefined;
      case 'present':
        return row !== undefined;
      case 'value':
        // etcd: a value compare against a missing key is false for both == and !=.
        if (row === undefined) return false;
        return c.op === '==' ? row.value === c.value : row.value !== c.value;
      case 'version':
        return compareNumbers(row?.version ?? 0, c.op, c.version);
      case 'modRevision':
        return compareNumbers(row?.mod_rev ?? 0, c.op, c.modRevision);
    }
  }

  /** Deletes the leases and their keys inside the caller's transaction; returns the revision. */
  private expireLeases(ids: readonly number[]): number {
    const rev = this.currentRevision();
    const next = rev + 1;
    let seq = 0;
    for (const id of ids) {
      for (const row of this.s.leaseKeys.all(id)) {
        this.s.delete.run(row.key);
        this.s.event.run(next, seq++, 1, row.key, '', row.create_rev, next, 0, 0);
      }
      this.s.deleteLease.run(id);
    }
    if (seq > 0) this.s.setMeta.run(next, 'revision');
    return seq > 0 ? next : rev;
  }

  private sweep(): void {
    if (this.closed) return;
    try {
      if (this.s.expired.all(this.now()).length > 0) {
        this.db
          .transaction(() => this.expireLeases(this.s.expired.all(this.now()).map((r) => r.id)))
          .immediate();
      }
      const floor = this.currentRevision() - this.historyRevisions;
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

  /** Delivers events of revisions after `dispatched` to every watcher. */
  private dispatch(): void {
    if (this.closed) return;
    let rows: EventRow[];
    let current: number;
    try {
      current = this.currentRevision();
      if (current <= this.dispatched) return;
      rows = this.s.eventsSince.all(this.dispatched, current);
    } catch {
      return; // a transient lock; the next poll retries
    }
    this.dispatched = current;
    for (const w of [...this.watchers]) {
      for (const batch of groupByRevision(rows.filter((e) => inRange(e, w)))) this.deliver(w, batch);
    }
  }

  private deliver(w: LocalWatcher, events: readonly WatchEvent[]): void {
    if (w.closed) return;
    try {
      w.handlers.onEvents(events);
    } catch (err) {
      w.handlers.onError?.(err instanceof Error ? err : new Error(String(err)));
    }
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

function inRange(e: EventRow, w: LocalWatcher): boolean {
  return e.rev >= w.from && e.key >= w.prefix && e.key < w.end;
}

