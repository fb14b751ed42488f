/**
 * Where etcd's messages and errors enter: the store's keys, compares and ops as etcd3's RPC
 * messages and back, and gRPC/etcd failures as coded store errors (the original kept as
 * `cause`), so nothing past etcd.ts sees a foreign type.
 */
import type * as RPC from 'etcd3/lib/rpc.js';
import { OvsnetError, messageOf } from '../../lib/errors.js';
import { prefixEnd } from '../keys.js';
import type { Compare, KeyValue, Op } from '../types.js';

/** A key or value as etcd takes it. */
export const bytes = (s: string): Buffer => Buffer.from(s, 'utf8');

const OPS = { '==': 'Equal', '>': 'Greater', '<': 'Less', '!=': 'NotEqual' } as const;

export function toKv(kv: RPC.IKeyValue): KeyValue {
  return {
    key: kv.key.toString('utf8'),
    value: kv.value.toString('utf8'),
    createRevision: Number(kv.create_revision),
    modRevision: Number(kv.mod_revision),
    version: Number(kv.version),
    lease: String(kv.lease),
  };
}

export function toCompare(c: Compare): RPC.ICompare {
  const key = bytes(c.key);
  switch (c.target) {
    case 'absent':
      return { key, target: 'Version', result: 'Equal', version: 0 };
    case 'present':
      return { key, target: 'Version', result: 'Greater', version: 0 };
    case 'value':
      return { key, target: 'Value', result: OPS[c.op], value: bytes(c.value) };
    case 'version':
      return { key, target: 'Version', result: OPS[c.op], version: c.version };
    case 'modRevision':
      return { key, target: 'Mod', result: OPS[c.op], mod_revision: c.modRevision };
  }
}

export function toRequestOp(op: Op): RPC.IRequestOp {
  switch (op.type) {
    case 'put':
      return { request_put: { key: bytes(op.key), value: bytes(op.value), lease: op.lease ?? 0 } };
    case 'delete':
      return { request_delete_range: { key: bytes(op.key) } };
    case 'deletePrefix':
      return { request_delete_range: { key: bytes(op.prefix), range_end: bytes(prefixEnd(op.prefix)) } };
    case 'get':
      return { request_range: { key: bytes(op.key) } };
  }
}

/**
 * A failure of an etcd call (`what`, against endpoints `where`) as a store error; the original
 * is kept as `cause`. Already converted errors pass through.
 */
/**
 * `recoverable`: etcd3's isRecoverableError once the client module is loaded (etcd.ts loads it
 * after the daemon listens); before that no error of the client's can arrive.
 */
export function convertError(where: string, what: string, err: unknown, recoverable: (err: Error) => boolean = () => false): OvsnetError {
  if (err instanceof OvsnetError) return err;
  const msg = messageOf(err);
  if (/requested lease not found/i.test(msg)) {
    return new OvsnetError('STORE_LEASE_NOT_FOUND', `etcd: ${msg}`, { cause: err });
  }
  if (/authentication failed|permission denied|invalid auth token|user name not found|user name is empty/i.test(msg)) {
    return new OvsnetError(
      'STORE_FORBIDDEN',
      `etcd at ${where} refused ${what}: ${msg} (check OVSNET_ETCD_USERNAME and OVSNET_ETCD_PASSWORD, and that the user's role may read and write /ovsnet/)`,
      { cause: err },
    );
  }
  if (/compacted/i.test(msg)) {
    return new OvsnetError('STORE_COMPACTED', `etcd ${what}: ${msg}`, { cause: err });
  }
  if (/closed/i.test(msg) && /client/i.test(msg)) {
    return new OvsnetError('STORE_CLOSED', 'the store was closed', { cause: err });
  }
  if (err instanceof Error && (recoverable(err) || /deadline|unavailable|circuit|connect/i.test(msg))) {
    return new OvsnetError('STORE_UNAVAILABLE', `etcd at ${where} is unavailable for ${what}: ${msg}`, { cause: err });
  }
  return new OvsnetError('STORE_CORRUPT', `etcd ${what} failed: ${msg}`, { cause: err });
}
