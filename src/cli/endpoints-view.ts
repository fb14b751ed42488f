/**
 * `ovsnet endpoints`: every endpoint with its container, address, MAC and OVS port; `-o wide` and
 * `-o json` add this host's endpoints' counters, read from the bridge as the command runs
 * (driver/upkeep/traffic-stats.ts: one `ovs-ofctl dump-ports` and one `dump-flows` per bridge,
 * nothing changed): packets and bytes the container sent and received, and its packets ovsnet's
 * rules dropped. They are OVS's own counts, since the port was added or ovs-vswitchd last
 * started (the metrics keep theirs monotonic across that: src/metrics-traffic.ts).
 */
import { hostNameOf, type Config } from '../config/config.js';
import { messageOf } from '../lib/errors.js';
import { OpenFlow } from '../driver/ovs/openflow.js';
import { DriverRecords, listEndpoints } from '../driver/records/driver-records.js';
import { attribute, readBridge, type EndpointTraffic } from '../driver/upkeep/traffic-stats.js';
import type { Store } from '../store/types.js';
import type { EndpointRecord } from '../driver/model/records.js';
import type { Invocation } from './dispatch.js';
import { dockerNames, nameOf } from './docker-api.js';
import { endpoints } from './inspect.js';
import type { Shown } from './output.js';
import type { CliContext, Session } from './session.js';

/** How long each ovs-ofctl read may take. */
const READ_TIMEOUT_MS = 5000;

/**
 * This host's endpoints' counters by 12-character endpoint ID, read from their bridges now;
 * `all`: every endpoint record, when the caller has read them already (one read, not two).
 */
export async function endpointCounters(
  config: Config,
  store: Store,
  of = new OpenFlow(),
  all?: readonly EndpointRecord[],
): Promise<Map<string, EndpointTraffic>> {
  const records = new DriverRecords(store, hostNameOf(config));
  const networks = await records.localNetworks();
  const local = await records.localEndpoints(networks, all);
  const byId = new Map(networks.map((n) => [n.networkId, n]));
  const places = local.flatMap((e) => {
    const n = byId.get(e.networkId);
    return n === undefined ? [] : [{ endpointId: e.endpointId, networkId: n.networkId, bridge: n.bridge, port: e.hostVeth }];
  });
  const bridges = [...new Set(places.map((p) => p.bridge))];
  const read = await Promise.all(bridges.map((b) => readBridge(of, b, READ_TIMEOUT_MS)));
  const found = attribute(read, places, networks).endpoints;
  return new Map([...found].map(([id, c]) => [id.slice(0, 12), c]));
}

const dash = (c: EndpointTraffic | undefined, n: (c: EndpointTraffic) => number): number | string => (c === undefined ? '-' : n(c));

export async function endpointsView(s: Session, inv: Invocation, ctx: Pick<CliContext, 'err'>): Promise<Shown> {
  const names = await dockerNames(s.dockerSocket);
  // Read once, for the counters and for the rows.
  const all = await listEndpoints(s.store);
  let counters = new Map<string, EndpointTraffic>();
  if (inv.format !== 'table') {
    counters = await endpointCounters(s.config, s.store, undefined, all).catch((err: unknown) => {
      ctx.err(`ovsnet: note: cannot read the endpoints' counters from bridge ${s.config.bridge}: ${messageOf(err)}`);
      return counters;
    });
  }
  const rows = (await endpoints(s.store, all)).map((e) => {
    const c = counters.get(e.endpoint);
    return {
      endpoint: e.endpoint,
      container: nameOf(names?.containers, e.endpoint),
      network: e.network,
      networkName: nameOf(names?.networks, e.network),
      address: e.address,
      mac: e.mac,
      port: e.port,
      ...(c === undefined ? {} : { counters: c }),
    };
  });
  // JSON keeps identifier-like keys; the table's header says it in words.
  const table = rows.map((r) => ({
    endpoint: r.endpoint,
    container: r.container,
    network: r.network,
    'network name': r.networkName,
    address: r.address,
    mac: r.mac,
    port: r.port,
  }));
  // From the container's side: what it sent is what its port received on the bridge.
  const wide = rows.map((r, i) => ({
    ...table[i],
    'sent pkts': dash(r.counters, (c) => c.sentPackets),
    'sent bytes': dash(r.counters, (c) => c.sentBytes),
    'received pkts': dash(r.counters, (c) => c.receivedPackets),
    'received bytes': dash(r.counters, (c) => c.receivedBytes),
    'policy drops': dash(r.counters, (c) => c.policyDrops),
  }));
  return { data: rows, table, wide };
}
