/**
 * The embedded store's SQLite side: schema, prepared statements, rows, opening a file safely
 * from several processes at once, and turning event rows into watch events. Used by the
 * sqlite*.ts modules only.
 */
import type Database from 'better-sqlite3';
import { requirePackage } from '../../lib/packages.js';
import type { KeyValue, WatchEvent } from '../types.js';

export interface Row {
  key: string;
  value: string;
  create_rev: number;
  mod_rev: number;
  version: number;
  lease: number;
}

export interface EventRow extends Row {
  rev: number;
  seq: number;
  type: number;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS kv (
  key TEXT PRIMARY KEY, value TEXT NOT NULL, create_rev INTEGER NOT NULL,
  mod_rev INTEGER NOT NULL, version INTEGER NOT NULL, lease INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS kv_lease ON kv(lease) WHERE lease != 0;
CREATE TABLE IF NOT EXISTS events (
  rev INTEGER NOT NULL, seq INTEGER NOT NULL, type INTEGER NOT NULL, key TEXT NOT NULL,
  value TEXT NOT NULL, create_rev INTEGER NOT NULL, mod_rev INTEGER NOT NULL,
  version INTEGER NOT NULL, lease INTEGER NOT NULL, PRIMARY KEY (rev, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS leases (id INTEGER PRIMARY KEY, ttl INTEGER NOT NULL, expires_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT OR IGNORE INTO meta VALUES ('revision', 1), ('compacted', 0);
`;

/** Every statement the store runs, prepared once per database. */
export function prepareStatements(db: Database.Database) {
  return {
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
    eventsSince: db.prepare<[number, number], EventRow>(`SELECT * FROM events WHERE rev > ? AND rev <= ? ORDER BY rev, seq`),
    compact: db.prepare<[number]>(`DELETE FROM events WHERE rev < ?`),
    lease: db.prepare<[number], { id: number; ttl: number; expires_at: number }>(`SELECT * FROM leases WHERE id = ?`),
    insertLease: db.prepare<[number, number, number]>(`INSERT INTO leases (id, ttl, expires_at) VALUES (?, ?, ?)`),
    renewLease: db.prepare<[number, number]>(`UPDATE leases SET expires_at = ? WHERE id = ?`),
    deleteLease: db.prepare<[number]>(`DELETE FROM leases WHERE id = ?`),
    leaseKeys: db.prepare<[number], Row>(`SELECT * FROM kv WHERE lease = ?`),
    expired: db.prepare<[number], { id: number }>(`SELECT id FROM leases WHERE expires_at <= ?`),
  };
}

export type Statements = ReturnType<typeof prepareStatements>;

/** The store's revision: moved by one per transaction that wrote something. */
export function currentRevision(s: Statements): number {
  return s.rev.get()?.value ?? 1;
}

export const toKv = (r: Row): KeyValue => ({
  key: r.key,
  value: r.value,
  createRevision: r.create_rev,
  modRevision: r.mod_rev,
  version: r.version,
  lease: String(r.lease),
});

/**
 * Opens the file in WAL mode with the schema. Switching to WAL takes an exclusive lock that
 * SQLite does not wait for (no busy handler), so two processes opening a new file at once
 * retry here, within the busy timeout.
 */
export function openDatabase(file: string, busyTimeoutMs: number): Database.Database {
  const Sqlite = requirePackage('better-sqlite3');
  const deadline = Date.now() + busyTimeoutMs;
  for (;;) {
    const db = new Sqlite(file, { timeout: busyTimeoutMs });
    try {
      db.pragma('journal_mode = WAL');
      // NORMAL in WAL mode: a committed transaction survives the process being killed (the
      // WAL is in the kernel's page cache), and the file stays consistent after a power cut,
      // which may roll back the last few commits. That cannot duplicate an address on this one
      // host: a power cut ends every container, and Docker re-requests addresses for all of
      // them after boot. FULL would fsync each commit: 0.09 -> 0.35 ms per allocation here
      // (bench/ipam.ts). Hosts sharing networks use etcd, which fsyncs its log.
      db.pragma('synchronous = NORMAL');
      db.transaction(() => db.exec(SCHEMA)).immediate();
      return db;
    } catch (err) {
      db.close();
      const busy = (err as { code?: string }).code?.startsWith('SQLITE_BUSY') === true;
      if (!busy || Date.now() > deadline) throw err;
      // A short synchronous back-off (the constructor cannot await).
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5 + Math.random() * 20);
    }
  }
}

export function groupByRevision(rows: readonly EventRow[]): WatchEvent[][] {
  const batches: WatchEvent[][] = [];
  let last = -1;
  for (const r of rows) {
    if (r.rev !== last) {
      batches.push([]);
      last = r.rev;
    }
    batches[batches.length - 1]?.push({ type: r.type === 0 ? 'put' : 'delete', kv: toKv(r) });
  }
  return batches;
}
