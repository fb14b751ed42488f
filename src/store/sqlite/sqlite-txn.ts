/**
 * The embedded store's transactions, evaluated against SQLite rows inside the caller's SQLite
 * transaction: the compares, then the ops of the branch that won, each change appended to the
 * event log under the next revision (watches replay from there). Etcd's semantics, which the
 * contract suite (test/store/contract.ts) checks both backends against.
 */
import { OvsnetError } from '../../lib/errors.js';
import { compareNumbers } from '../common.js';
import { prefixEnd } from '../keys.js';
import { currentRevision, toKv, type Statements } from './sqlite-db.js';
import type { Compare, KeyValue, Op, TxnRequest, TxnResult } from '../types.js';

/** Runs `request`; the revision moves by one when it wrote anything. `now`: the lease clock. */
export function applyTxn(s: Statements, request: TxnRequest, now: () => number): TxnResult {
  const rev = currentRevision(s);
  const next = rev + 1;
  const succeeded = request.compares.every((c) => evaluate(s, c));
  const ops = succeeded ? request.success : (request.failure ?? []);
  const gets: (KeyValue | undefined)[] = [];
  let seq = 0;
  for (const op of ops) seq = applyOp(s, op, next, seq, gets, now);
  if (seq > 0) s.setMeta.run(next, 'revision');
  return { succeeded, revision: seq > 0 ? next : rev, gets };
}

/** Deletes the leases and their keys; returns the revision after. */
export function expireLeases(s: Statements, ids: readonly number[]): number {
  const rev = currentRevision(s);
  const next = rev + 1;
  let seq = 0;
  for (const id of ids) {
    for (const row of s.leaseKeys.all(id)) {
      s.delete.run(row.key);
      s.event.run(next, seq++, 1, row.key, '', row.create_rev, next, 0, 0);
    }
    s.deleteLease.run(id);
  }
  if (seq > 0) s.setMeta.run(next, 'revision');
  return seq > 0 ? next : rev;
}

/** Applies one op at revision `next`; returns the event sequence number after it. */
function applyOp(s: Statements, op: Op, next: number, seq: number, gets: (KeyValue | undefined)[], now: () => number): number {
  switch (op.type) {
    case 'get': {
      const row = s.get.get(op.key);
      gets.push(row === undefined ? undefined : toKv(row));
      return seq;
    }
    case 'put': {
      const lease = op.lease === undefined ? 0 : Number(op.lease);
      if (lease !== 0) {
        const l = s.lease.get(lease);
        if (l === undefined || l.expires_at <= now()) {
          throw new OvsnetError('STORE_LEASE_NOT_FOUND', `cannot put ${op.key} under lease ${op.lease}: it has expired or was revoked`);
        }
      }
      const old = s.get.get(op.key);
      const createRev = old?.create_rev ?? next;
      const version = (old?.version ?? 0) + 1;
      s.upsert.run(op.key, op.value, createRev, next, version, lease);
      s.event.run(next, seq, 0, op.key, op.value, createRev, next, version, lease);
      return seq + 1;
    }
    case 'delete': {
      const old = s.get.get(op.key);
      if (old === undefined) return seq;
      s.delete.run(op.key);
      s.event.run(next, seq, 1, op.key, '', old.create_rev, next, 0, 0);
      return seq + 1;
    }
    case 'deletePrefix': {
      for (const old of s.keysInRange.all(op.prefix, prefixEnd(op.prefix))) {
        s.delete.run(old.key);
        s.event.run(next, seq++, 1, old.key, '', old.create_rev, next, 0, 0);
      }
      return seq;
    }
  }
}

function evaluate(s: Statements, c: Compare): boolean {
  const row = s.get.get(c.key);
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
