/**
 * IPAM's keys are built and parsed in state/ only: what a key of the ipam/ family names, and the
 * transaction parts built on them, read back by the same parser.
 */
import t from 'tap';
import { IPAM_PREFIX, parseIpamKey } from '../../../src/ipam-driver/state/ipam-keys.js';
import { blockTxn, countTxn, poolTxn, reservationTxn } from '../../../src/ipam-driver/state/ipam-txn.js';
import type { PoolRecord, Reservation } from '../../../src/ipam-driver/state/records.js';

const poolId = 'ovsnet-local/10.0.0.0/24';
const keyOf = (op: { type: string; key?: string }) => op.key ?? '';

t.test('each part names its record, and the parser reads it back', async (t) => {
  const r: Reservation = { address: '10.0.0.5', poolId, kind: 'dynamic', host: 'a', reservedAt: '2026-01-01T00:00:00Z' };
  t.same(parseIpamKey(keyOf(reservationTxn.put(r))), { kind: 'address', poolId, address: '10.0.0.5' });
  t.same(parseIpamKey(keyOf(countTxn.put(poolId, 1))), { kind: 'count', poolId });
  t.same(parseIpamKey(keyOf(blockTxn.del(poolId, '10.0.0.64'))), { kind: 'block', poolId, start: '10.0.0.64' });
  const pool = { poolId, pool: '10.0.0.0/24' } as PoolRecord;
  t.same(parseIpamKey(keyOf(poolTxn.put(pool))), { kind: 'pool', poolId }, 'a PoolID with slashes stays one part');
  t.same(JSON.parse((reservationTxn.put(r) as { value: string }).value), r, 'the value is the record');
});

t.test('anything else under the prefix is other', async (t) => {
  t.same(parseIpamKey(`${IPAM_PREFIX}spaces/x`), { kind: 'other' });
  t.same(parseIpamKey(`${IPAM_PREFIX}addresses/p`), { kind: 'other' }, 'a pool prefix names no address');
  t.same(parseIpamKey('/elsewhere/pools/p'), { kind: 'other' });
});

t.test('a block not seen is compared as absent', async (t) => {
  t.match(blockTxn.unchanged(poolId, '10.0.0.0', undefined), { target: 'absent' });
  t.match(blockTxn.unchanged(poolId, '10.0.0.0', 7), { target: 'modRevision', modRevision: 7 });
});
