/**
 * The clustered store: etcd v3 through the etcd3 client, raw KV/Lease/Watch RPCs.
 *
 * Every unary call is raced against OVSNET_STORE_TIMEOUT_MS (and carries a gRPC deadline a
 * little later), so a lost connection surfaces as STORE_UNAVAILABLE / STORE_TIMEOUT well inside
 * Docker's 15 s retry window, never as a hang; an answer that arrived by then is never dropped.
 * gRPC and etcd errors are converted where they enter (etcd-convert.ts), kept as `cause`.
 * The client module (etcd3, with gRPC and protobuf: the heaviest of ovsnet's imports) is loaded
 * on the first call, not when the process starts, so that the daemon listens first; outside
 * that call's bound (see call()).
 */
import type { Etcd3, IOptions } from 'etcd3';
import type * as RPC from 'etcd3/lib/rpc.js';
import { expireAfterIo } from '../../lib/timers.js';
import { OvsnetError } from '../../lib/errors.js';
import { keys, prefixEnd } from '../keys.js';
import { MAX_PAGE } from '../common.js';
import { bytes, convertError, toCompare, toKv, toRequestOp } from './etcd-convert.js';
import type {
  KeyValue,
  LeaseId,
  RangeOptions,
  RangePage,
  Store,
  TxnRequest,
  TxnResult,
  WatchEvent,
  WatchHandlers,
  Watcher,
} from '../types.js';
import { requirePackage } from '../../lib/packages.js';

const { BrokenCircuitError, ConsecutiveBreaker, ConstantBackoff, circuitBreaker, handleWhen, noop, retry } = requirePackage('cockatiel');

/** How long a call waits before trying again while the endpoint's circuit is open. */
const CIRCUIT_WAIT_MS = 200;
/** gRPC's deadline trails call()'s bound by this much, so call() decides. */
const GRPC_DEADLINE_SLACK_MS = 1000;

export interface EtcdStoreOptions {
  /** http(s)://host:port endpoints. */
  readonly endpoints: readonly string[];
  /** Bound on every call, in ms. */
  readonly timeoutMs: number;
  readonly tls?: { readonly ca: Buffer; readonly cert?: Buffer; readonly key?: Buffer };
  readonly auth?: { readonly username: string; readonly password: string };
}

export class EtcdStore implements Store {
  readonly kind = 'etcd' as const;
  private connecting: Promise<Etcd3> | undefined;
  private closed = false;
  /** etcd3's isRecoverableError, once loaded. */
  private recoverable: (err: Error) => boolean = () => false;
  private readonly timeoutMs: number;
  private readonly where: string;
  private readonly options: EtcdStoreOptions;

  constructor(options: EtcdStoreOptions) {
    this.timeoutMs = options.timeoutMs;
    this.where = options.endpoints.join(',');
    this.options = options;
  }

  /** The client, made on the first call (after the daemon listens: see the header). */
  private get client(): Promise<Etcd3> {
    if (this.closed) return Promise.reject(new OvsnetError('STORE_CLOSED', 'the store was closed'));
    // A failure to load or configure the client rejects, as any failed call does.
    return (this.connecting ??= Promise.resolve(this.options).then((options) => this.connect(options)));
  }

  private connect(options: EtcdStoreOptions): Etcd3 {
    const { Etcd3, isRecoverableError } = requirePackage('etcd3');
    this.recoverable = isRecoverableError;
    const timeoutMs = options.timeoutMs;
    const config: IOptions = {
      hosts: [...options.endpoints],
      dialTimeout: Math.min(timeoutMs, 3000),
      // gRPC's own deadline only ends calls that call() has given up on: it fires in the timers
      // phase and would discard an answer already waiting in the socket (see call()).
      defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + timeoutMs + GRPC_DEADLINE_SLACK_MS }),
      faultHandling: {
        // A failing endpoint is skipped for a second; a recoverable failure is retried once on
        // another endpoint. The outer race in call() keeps the total within timeoutMs.
        host: () =>
          circuitBreaker(handleWhen(isRecoverableError), {
            halfOpenAfter: 1000,
            breaker: new ConsecutiveBreaker(3),
          }),
        global:
          options.endpoints.length > 1 ? retry(handleWhen(isRecoverableError), { maxAttempts: 1, backoff: new ConstantBackoff(50) }) : noop,
      },
    };
    if (options.tls !== undefined) {
      config.credentials = {
        rootCertificate: options.tls.ca,
        ...(options.tls.key === undefined ? {} : { privateKey: options.tls.key }),
        ...(options.tls.cert === undefined ? {} : { certChain: options.tls.cert }),
      };
    }
    if (options.auth !== undefined) config.auth = { ...options.auth };
    return new Etcd3(config);
  }

  async get(key: string): Promise<KeyValue | undefined> {
    const res = await this.call('get', async (client) => client.kv.range({ key: bytes(key) }));
    const kv = res.kvs[0];
    return kv === undefined ? undefined : toKv(kv);
  }

  async range(prefix: string, options: RangeOptions = {}): Promise<RangePage> {
    return this.page(prefix, options, undefined);
  }

  async list(prefix: string): Promise<RangePage> {
    // Pages after the first are read at the first page's revision: one snapshot.
    const first = await this.page(prefix, {}, undefined);
    const kvs = [...first.kvs];
    let more = first.more;
    while (more) {
      const last = kvs[kvs.length - 1];
      const next = await this.page(prefix, last === undefined ? {} : { after: last.key }, first.revision);
      kvs.push(...next.kvs);
      more = next.more;
    }
    return { kvs, more: false, revision: first.revision };
  }

  async revision(): Promise<number> {
    const res = await this.call('revision', async (client) => client.kv.range({ key: bytes(keys.health), count_only: true }));
    return Number(res.header.revision);
  }

  async txn(request: TxnRequest): Promise<TxnResult> {
    const res = await this.call('txn', async (client) =>
      client.kv.txn({
        compare: request.compares.map(toCompare),
        success: request.success.map(toRequestOp),
        failure: (request.failure ?? []).map(toRequestOp),
      }),
    );
    const gets: (KeyValue | undefined)[] = [];
    for (const r of res.responses) {
      // The union arrives with only the populated member set.
      const range = (r as Partial<RPC.IResponseOp>).response_range;
      if (range !== undefined && range !== null) {
        const kv = range.kvs[0];
        gets.push(kv === undefined ? undefined : toKv(kv));
      }
    }
    return { succeeded: res.succeeded, revision: Number(res.header.revision), gets };
  }

  async watch(prefix: string, fromRevision: number, handlers: WatchHandlers): Promise<Watcher> {
    const watcher = await this.call('watch', async (client) => client.watch().prefix(prefix).startRevision(String(fromRevision)).create());
    let failed = false;
    watcher.on('data', (res) => {
      if (failed) return;
      if (res.canceled && Number(res.compact_revision) > 0) {
        failed = true;
        handlers.onError?.(
          new OvsnetError(
            'STORE_COMPACTED',
            `cannot watch ${prefix} from revision ${fromRevision}: etcd compacted history up to ${res.compact_revision}; read again and watch from the read's revision + 1`,
          ),
        );
        void watcher.cancel().catch(() => undefined);
        return;
      }
      // One response can hold several revisions: deliver one batch per revision, in order.
      let batch: WatchEvent[] = [];
      let rev = -1;
      for (const e of res.events) {
        const kv = toKv(e.kv);
        const type = e.type === 'Delete' ? 'delete' : 'put';
        if (kv.modRevision !== rev && batch.length > 0) {
          handlers.onEvents(batch);
          batch = [];
        }
        rev = kv.modRevision;
        batch.push({ type, kv: type === 'delete' ? { ...kv, value: '', version: 0, lease: '0' } : kv });
      }
      if (batch.length > 0) handlers.onEvents(batch);
    });
    watcher.on('error', (err) => {
      if (failed) return;
      failed = true;
      handlers.onError?.(convertError(this.where, 'watch', err, this.recoverable));
    });
    return { close: () => watcher.cancel().catch(() => undefined) };
  }

  async grantLease(ttlSeconds: number): Promise<LeaseId> {
    const res = await this.call('grantLease', async (client) => client.leaseClient.leaseGrant({ TTL: ttlSeconds }));
    return String(res.ID);
  }

  async keepAlive(lease: LeaseId): Promise<void> {
    const res = await this.call('keepAlive', async (client) => {
      const stream = await client.leaseClient.leaseKeepAlive();
      return new Promise<RPC.ILeaseKeepAliveResponse>((resolve, reject) => {
        stream.on('data', (r) => {
          resolve(r);
          stream.end();
        });
        stream.on('error', reject);
        stream.write({ ID: lease });
      }).finally(() => stream.cancel());
    });
    if (Number(res.TTL) <= 0) {
      throw new OvsnetError('STORE_LEASE_NOT_FOUND', `lease ${lease} has expired or was revoked; grant a new one`);
    }
  }

  async revokeLease(lease: LeaseId): Promise<void> {
    try {
      await this.call('revokeLease', async (client) => client.leaseClient.leaseRevoke({ ID: lease }));
    } catch (err) {
      if (err instanceof OvsnetError && err.code === 'STORE_LEASE_NOT_FOUND') return;
      throw err;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    (await this.connecting?.catch(() => undefined))?.close();
  }

  // --- internals -------------------------------------------------------------------------

  private async page(prefix: string, options: RangeOptions, revision: number | undefined): Promise<RangePage> {
    const limit = Math.min(options.limit ?? MAX_PAGE, MAX_PAGE);
    const start = options.after === undefined ? prefix : options.after + '\0';
    const res = await this.call('range', async (client) =>
      client.kv.range({
        key: bytes(start),
        range_end: bytes(prefixEnd(prefix)),
        limit,
        ...(revision === undefined ? {} : { revision }),
      }),
    );
    return { kvs: res.kvs.map(toKv), more: res.more, revision: Number(res.header.revision) };
  }

  /**
   * Runs one etcd call within the timeout, converting every failure into a store error. The
   * client module is loaded before the clock starts: loading gRPC and protobuf is this process's
   * own work (0.2 s idle, 0.7 s beside six busy loops on 2 cores), not etcd failing to answer. Connecting
   * is inside the bound: that is etcd's part.
   */
  private async call<T>(what: string, fn: (client: Etcd3) => Promise<T>): Promise<T> {
    let client: Etcd3;
    try {
      client = await this.client;
    } catch (err) {
      throw convertError(this.where, what, err, this.recoverable);
    }
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      const expire = () =>
        reject(
          new OvsnetError(
            'STORE_TIMEOUT',
            `etcd at ${this.where} did not answer ${what} within ${this.timeoutMs} ms (OVSNET_STORE_TIMEOUT_MS)`,
          ),
        );
      timer = expireAfterIo(this.timeoutMs, expire);
    });
    const deadline = Date.now() + this.timeoutMs;
    const attempt = async (): Promise<T> => {
      for (;;) {
        try {
          return await fn(client);
        } catch (err) {
          // An open circuit means the call was never sent (safe to repeat, even a txn): after an
          // outage, wait for the circuit to half-open within the bound rather than fail at once.
          if (!(err instanceof BrokenCircuitError) || Date.now() + CIRCUIT_WAIT_MS > deadline) throw err;
          await new Promise((r) => setTimeout(r, CIRCUIT_WAIT_MS));
        }
      }
    };
    try {
      return await Promise.race([attempt(), timeout]);
    } catch (err) {
      throw convertError(this.where, what, err, this.recoverable);
    } finally {
      clearTimeout(timer);
    }
  }
}
