/**
 * The names ovsnet trace's words use: a network by its local tag (its ovsnet name, else
 * Docker's), a datapath port by its number, read from dpif/show's listing of ovs-vswitchd's
 * ports (this host's, or a peer's in its answer: src/cluster/traces.ts). Pure.
 */
import type { NetworkRecord } from '../../driver/model/records.js';
import type { TraceNames } from './explain.js';

/**
 * `shown`: dpif/show's text ("    NAME OFPORT/ODPPORT: (type)" under each bridge); only ports of
 * `bridge` that `isPort` accepts are named.
 */
export function namesFrom(
  shown: string,
  bridge: string,
  networks: readonly NetworkRecord[],
  isPort: (name: string) => boolean,
  dockerNames: ReadonlyMap<string, string> = new Map(),
): TraceNames {
  const odp = new Map<number, string>();
  let inBridge = false;
  for (const line of shown.split('\n')) {
    if (/^\s{2}\S.*:$/.test(line)) inBridge = line.trim() === `${bridge}:`;
    const m = /^\s{4}(\S+) (\d+)\/(\d+):/.exec(line);
    if (inBridge && m !== null && isPort(m[1] ?? '')) odp.set(Number(m[3]), m[1] ?? '');
  }
  const byTag = new Map(networks.map((n) => [n.tag, n]));
  return {
    networkOfTag: (tag) => {
      const n = byTag.get(tag);
      if (n === undefined) return `of tag ${tag}`;
      return n.group?.name ?? n.logical ?? n.groupsName ?? dockerNames.get(n.networkId) ?? n.networkId.slice(0, 12);
    },
    portOfOdp: (p) => odp.get(p),
  };
}
