/** Opens the configured store backend. */
import fs from 'node:fs';
import type { StoreConfig } from '../config.js';
import { OvsnetError, messageOf } from '../errors.js';
import { EtcdStore } from './etcd.js';
import { SqliteStore } from './sqlite.js';
import type { Store } from './types.js';

export function openStore(config: StoreConfig, timeoutMs: number): Store {
  switch (config.kind) {
    case 'sqlite':
      return new SqliteStore({ file: config.file, busyTimeoutMs: timeoutMs });
    case 'etcd': {
      const read = (file: string, setting: string): Buffer => {
        try {
          return fs.readFileSync(file);
        } catch (err) {
          throw new OvsnetError('CONFIG_INVALID', `${setting}=${file} cannot be read: ${messageOf(err)} (expected a readable PEM file)`, { cause: err });
        }
      };
      const tls = config.tls;
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

/** Where the store is, for logs and status (never the password). */
export function describeStore(config: StoreConfig): string {
  return config.kind === 'sqlite' ? `sqlite:${config.file}` : `etcd://${config.endpoints.join(',')}`;
}
