/**
 * Opens the configured store backend. The backend module is loaded in the background (etcd's
 * gRPC client alone takes ~250 ms to load): the returned store queues calls until it is ready,
 * so the plugin socket can answer Docker before the store is even loaded.
 */
import fs from 'node:fs';
import type { StoreConfig } from '../config/config.js';
import { OvsnetError, isOvsnetError, messageOf } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import { secureStateFiles } from './state-files.js';
import type { KeyValue, LeaseId, RangeOptions, RangePage, Store, TxnRequest, TxnResult, WatchHandlers, Watcher } from './types.js';

/** How a store is opened: `existing`, an embedded store's file must be there (the CLI never makes one). */
export interface OpenOptions {
  readonly log?: Pick<Logger, 'warn'>;
  readonly existing?: boolean;
}

async function load(config: StoreConfig, timeoutMs: number, { log, existing = false }: OpenOptions): Promise<Store> {
  switch (config.kind) {
    case 'sqlite': {
      if (existing && !fs.existsSync(config.file))
        throw new OvsnetError(
          'STORE_UNAVAILABLE',
          `no embedded store at ${config.file}: no ovsnet daemon has run here with OVSNET_STORE=sqlite:${config.file} (start it, or name the store it uses: OVSNET_STORE, or --settings-file with its settings)`,
        );
      let notes: string[];
      try {
        notes = secureStateFiles(config.file, { sharedDir: config.sharedDir === true });
      } catch (err) {
        if (isOvsnetError(err, 'STATE_FILE_UNSAFE')) throw err;
        throw new OvsnetError(
          'STORE_UNAVAILABLE',
          `cannot open the embedded store at ${config.file}: ${messageOf(err)} (OVSNET_STORE=sqlite:/absolute/path.db, a writable directory)`,
          { cause: err },
        );
      }
      for (const note of notes) log?.warn({ file: config.file }, note);
      const { SqliteStore } = await import('./sqlite/sqlite.js');
      return new SqliteStore({ file: config.file, busyTimeoutMs: timeoutMs });
    }
    case 'etcd': {
      const read = (file: string, setting: string): Buffer => {
        try {
          return fs.readFileSync(file);
        } catch (err) {
          throw new OvsnetError('CONFIG_INVALID', `${setting}=${file} cannot be read: ${messageOf(err)} (expected a readable PEM file)`, {
            cause: err,
          });
        }
      };
      const tls = config.tls;
      const { EtcdStore } = await import('./etcd/etcd.js');
      return new EtcdStore({
        endpoints: config.endpoints,
        timeoutMs,
        ...(tls === undefined
          ? {}
          : {
              tls: {
                ca: read(tls.caFile, 'OVSNET_ETCD_CA'),
                ...(tls.certFile === undefined ? {} : { cert: read(tls.certFile, 'OVSNET_ETCD_CERT') }),
                ...(tls.keyFile === undefined ? {} : { key: read(tls.keyFile, 'OVSNET_ETCD_KEY') }),
              },
            }),
        ...(config.auth === undefined ? {} : { auth: config.auth }),
      });
    }
  }
}

/** A store whose backend is still loading: every call waits for it. */
class DeferredStore implements Store {
  readonly kind: Store['kind'];
  private readonly ready: Promise<Store>;

  constructor(config: StoreConfig, timeoutMs: number, options: OpenOptions) {
    this.kind = config.kind;
    this.ready = load(config, timeoutMs, options);
    this.ready.catch(() => undefined); // surfaced by the first call
  }

  /** Resolves once the backend is loaded (or rejects with why it cannot be). */
  loaded(): Promise<Store> {
    return this.ready;
  }

  get(key: string): Promise<KeyValue | undefined> {
    return this.ready.then((s) => s.get(key));
  }
  range(prefix: string, options?: RangeOptions): Promise<RangePage> {
    return this.ready.then((s) => s.range(prefix, options));
  }
  list(prefix: string): Promise<RangePage> {
    return this.ready.then((s) => s.list(prefix));
  }
  txn(request: TxnRequest): Promise<TxnResult> {
    return this.ready.then((s) => s.txn(request));
  }
  watch(prefix: string, fromRevision: number, handlers: WatchHandlers): Promise<Watcher> {
    return this.ready.then((s) => s.watch(prefix, fromRevision, handlers));
  }
  grantLease(ttlSeconds: number): Promise<LeaseId> {
    return this.ready.then((s) => s.grantLease(ttlSeconds));
  }
  keepAlive(lease: LeaseId): Promise<void> {
    return this.ready.then((s) => s.keepAlive(lease));
  }
  revokeLease(lease: LeaseId): Promise<void> {
    return this.ready.then((s) => s.revokeLease(lease));
  }
  revision(): Promise<number> {
    return this.ready.then((s) => s.revision());
  }
  close(): Promise<void> {
    return this.ready.then(
      (s) => s.close(),
      () => undefined,
    );
  }
}

/** `log` hears what was changed to keep the embedded store's files private (secureStateFiles). */
export function openStore(config: StoreConfig, timeoutMs: number, options: OpenOptions = {}): Store & { loaded(): Promise<Store> } {
  return new DeferredStore(config, timeoutMs, options);
}

/** Where the store is, for logs and status (never the password). */
export function describeStore(config: StoreConfig): string {
  return config.kind === 'sqlite' ? `sqlite:${config.file}` : `etcd://${config.endpoints.join(',').replace(/https?:\/\//g, '')}`;
}
