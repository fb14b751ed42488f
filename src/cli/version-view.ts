/** `ovsnet version`: this CLI's version and the running daemon's, as it reports them. */
import { VERSION } from '../lib/version.js';
import type { DaemonFound } from './locate.js';
import type { Shown } from './output.js';

export function versionRows(daemon: DaemonFound | undefined): Shown {
  const client = { component: 'client', version: VERSION, detail: `Node.js ${process.version}` };
  const i = daemon?.info;
  const server =
    daemon === undefined
      ? { component: 'daemon', version: '-', detail: "no ovsnet daemon answers (its socket, /etc/default/ovsnet's, or a managed plugin)" }
      : i === undefined
        ? { component: 'daemon', version: '<0.2', detail: `answers on ${daemon.socket} (${daemon.via}) without an admin endpoint` }
        : {
            component: 'daemon',
            version: i.version,
            detail: `${daemon.socket} (${daemon.via}), pid ${i.pid}, up ${i.uptimeSeconds} s, store ${i.store.store} ${i.store.ok ? 'ok' : `failing: ${i.store.error ?? ''}`}`,
          };
  return {
    data: {
      client: { version: VERSION, nodejs: process.version },
      daemon:
        daemon === undefined
          ? null
          : {
              socket: daemon.socket,
              via: daemon.via,
              ...(i === undefined
                ? {}
                : { version: i.version, pid: i.pid, startedAt: i.startedAt, uptimeSeconds: i.uptimeSeconds, store: i.store }),
            },
    },
    table: [client, server],
  };
}
