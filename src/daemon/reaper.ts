/**
 * The reaper's view of the driver (ipam-driver/recovery/orphan-reaper.ts): IPAM does not read the driver's
 * records, so the daemon hands it the endpoints of every host and this host's ovsnet subnets.
 *
 * It also removes this host's endpoints that left their container while ovsnet was down: when
 * a container goes, Docker moves the container end of its veth back to the host under the name
 * the driver gave it (ovc...), then calls Leave and DeleteEndpoint; if those found no plugin, the
 * endpoint's record, OVS port and veth stay, and its reservation with them. A container end
 * seen in the host's namespace on two looks at least the grace period apart is such an
 * endpoint: it is deleted as DeleteEndpoint would, and the reaper then finds its reservation's
 * endpoint gone. An endpoint this daemon joined is judged only once its end was seen in its
 * container: before that, Docker has not moved it yet (endpoint/placements.ts).
 */
import type { Config } from '../config/config.js';
import type { LinksApi } from '../driver/effects/deps.js';
import type { NetworkDriver } from '../driver/network-driver.js';
import { listNetworks } from '../driver/records/driver-records.js';
import { pickEndpoints } from '../driver/records/endpoint-pages.js';
import type { EndpointRecord } from '../driver/model/records.js';
import { messageOf } from '../lib/errors.js';
import type { Ipam } from '../ipam-driver/ipam.js';
import { Reaper, type CniJudge, type CniRemove } from '../ipam-driver/recovery/orphan-reaper.js';
import type { Logger } from '../lib/log.js';
import type { Metrics } from '../metrics.js';
import type { Store } from '../store/types.js';

const plain = (cidr: string) => cidr.split('/')[0] ?? '';

/** What a sweep keeps of an endpoint record (endpoint-pages.ts): its names, host and addresses. */
type Swept = Pick<EndpointRecord, 'endpointId' | 'networkId' | 'host' | 'containerVeth'> & { readonly addresses: readonly string[] };

const swept = (e: EndpointRecord): Swept => ({
  endpointId: e.endpointId,
  networkId: e.networkId,
  containerVeth: e.containerVeth,
  ...(e.host === undefined ? {} : { host: e.host }),
  addresses: [e.address, e.addressV6].flatMap((a) => (a === undefined || a === '' ? [] : [plain(a)])),
});

export interface ReaperParts {
  readonly config: Config;
  readonly store: Store;
  readonly log: Logger;
  readonly host: string;
  readonly ipam: Ipam;
  /** Its placements: the Joins whose container end Docker has not moved yet. */
  readonly driver: Pick<NetworkDriver, 'deleteEndpoint' | 'placements'>;
  readonly links: Pick<LinksApi, 'aliased'>;
  readonly metrics: Metrics | undefined;
  /** The CNI front end's view of its attachments; undefined with OVSNET_CNI_SOCKET=off. */
  readonly cni: { readonly alive: CniJudge; readonly collect: CniRemove } | undefined;
}

export function makeReaper(p: ReaperParts): Reaper {
  const graceMs = p.config.reapGraceSeconds * 1000;
  const cni = p.cni;
  /** This host's endpoints whose container end was seen in the host's namespace: since when. */
  const left = new Map<string, number>();
  /** Removes those endpoints; returns every endpoint left (one paged read of them per sweep). */
  const removeLeft = async (): Promise<Swept[]> => {
    const now = Date.now();
    const seen = new Set<string>();
    const all = await pickEndpoints(p.store, swept);
    p.driver.placements.prune(new Set(all.map((e) => e.endpointId)), now);
    const removed = new Set<string>();
    const mine = all.filter((ep) => (ep.host ?? p.host) === p.host);
    // One dump of the host's links per sweep, not a lookup per endpoint (10k on a host are 10k
    // netlink round trips every sweep): an empty prefix matches every link, with an alias or none.
    const hostLinks = mine.length === 0 ? new Set<string>() : new Set((await p.links.aliased('')).map((l) => l.name));
    for (const ep of mine) {
      const onHost = hostLinks.has(ep.containerVeth);
      if (!p.driver.placements.judgeable(ep.endpointId, onHost) || !onHost) continue;
      seen.add(ep.endpointId);
      const since = left.get(ep.endpointId) ?? now;
      left.set(ep.endpointId, since);
      if (now - since < graceMs) continue;
      try {
        await p.driver.deleteEndpoint(ep.networkId, ep.endpointId);
        removed.add(ep.endpointId);
        p.log.warn(
          { networkId: ep.networkId, endpointId: ep.endpointId, veth: ep.containerVeth },
          `endpoint ${ep.endpointId.slice(0, 12)} left its container and Docker's DeleteEndpoint never reached ovsnet (its container end ${ep.containerVeth} is back on the host): removed`,
        );
      } catch (err) {
        p.log.warn({ err, endpointId: ep.endpointId }, `cannot remove endpoint ${ep.endpointId.slice(0, 12)} yet: ${messageOf(err)}`);
      }
    }
    for (const id of left.keys()) if (!seen.has(id)) left.delete(id);
    return all.filter((e) => !removed.has(e.endpointId));
  };
  return new Reaper({
    store: p.store,
    log: p.log,
    host: p.host,
    graceMs,
    endpoints: async () => {
      const all = await removeLeft();
      return {
        ids: new Set(all.map((e) => e.endpointId)),
        addresses: new Set(all.flatMap((e) => e.addresses)),
      };
    },
    driverPools: async () =>
      new Set(
        (await listNetworks(p.store))
          .filter((n) => (n.host ?? p.host) === p.host)
          .flatMap((n) => [...n.ipv4, ...n.ipv6].map((d) => d.pool)),
      ),
    release: (poolId, address, onlyIf, reason) => p.ipam.reap(poolId, address, onlyIf, reason === 'never bound'),
    onReaped: (reason) => p.metrics?.observeReaped(reason),
    ...(cni === undefined
      ? {}
      : {
          cniAlive: (id: string, ifname: string) => cni.alive(id, ifname),
          cniRemove: (id: string, ifname: string) => cni.collect(id, ifname),
        }),
  });
}

/** How often the reaper sweeps: a third of the grace period, 1 to 30 s. */
export const reapIntervalMs = (config: Config) => Math.min(Math.max(config.reapGraceSeconds * 333, 1000), 30_000);
