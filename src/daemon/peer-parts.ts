/**
 * What hosts sharing etcd do for each other, made for assemble.ts: each follows the others'
 * records of the logical networks that have endpoint groups (remote-family.ts), and answers the
 * trace requests of their ovsnet trace (src/cluster/traces.ts). With the embedded store,
 * neither: no host shares it.
 */
import type { HostRecord } from '../cluster/hosts.js';
import { TraceAnswerer } from '../cluster/traces.js';
import type { Config } from '../config/config.js';
import { RemoteFamilies } from '../driver/groups/remote-family.js';
import { Vswitchd } from '../driver/ovs/vswitchd.js';
import { messageOf } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import type { Store } from '../store/types.js';

export interface PeerPartsInput {
  readonly config: Config;
  readonly store: Store;
  readonly log: Logger;
  readonly hostName: string;
  /** ovs-vswitchd's control socket, when the daemon has one already (userspace datapath). */
  readonly vswitchd: Vswitchd | undefined;
  /** The host registry (the groups find a peer's tunnel port by its address). */
  readonly hosts: () => ReadonlyMap<string, HostRecord>;
  /** The whole bridge's OpenFlow state made what the records say (Upkeep.syncFlows). */
  readonly syncFlows: () => Promise<unknown>;
}

export function peerParts(i: PeerPartsInput): { remoteGroups: RemoteFamilies | undefined; traces: TraceAnswerer | undefined } {
  if (i.config.store.kind !== 'etcd') return { remoteGroups: undefined, traces: undefined };
  const remoteGroups = new RemoteFamilies({
    store: i.store,
    log: i.log.child({ component: 'groups' }),
    self: i.hostName,
    hosts: i.hosts,
    onChange: () => {
      i.syncFlows().catch((err: unknown) => i.log.warn({ err }, `cannot apply the groups of logical networks: ${messageOf(err)}`));
    },
  });
  // Without ovs-vswitchd's control socket here (OVSDB on another machine) no trace is answered.
  const vswitchd = i.vswitchd ?? Vswitchd.besideOvsdb(i.config.ovsdb, 10_000);
  const traces =
    vswitchd === undefined
      ? undefined
      : new TraceAnswerer({
          store: i.store,
          log: i.log.child({ component: 'traces' }),
          self: i.hostName,
          bridge: i.config.bridge,
          command: (method, params) => vswitchd.command(method, params),
        });
  return { remoteGroups, traces };
}
