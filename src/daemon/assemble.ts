/**
 * Builds the daemon's objects in dependency order, and nothing more: no socket, no timer, no
 * store call (like fastify's build() apart from listen()). daemon.ts starts and stops them.
 *
 * Each object is made after everything it reads, and is given what it tells at construction:
 * no hook is set afterwards. Two links run against that order: the tunnels are made before the
 * driver and the registry, which tell them of changes, and read those two only once started
 * (daemon.ts, after this returns); the metrics gauges read IPAM, the registry and the tunnels
 * (connected last, by readFrom), and the endpoints' counters the driver's records and the bridge.
 */
import type { FastifyInstance } from 'fastify';
import { hostNameOf, type Config } from '../config/config.js';
import { Flows } from '../driver/ovs/flows.js';
import { OpenFlow } from '../driver/ovs/openflow.js';
import { QosFlows } from '../driver/ovs/qos-flows.js';
import { GroupFlows } from '../driver/ovs/groups/group-flows.js';
import { Links } from '../driver/links/links.js';
import { leaveLogical } from '../driver/vxlan/logical.js';
import { IPV6_FORWARDING, Nat } from '../driver/ports/nat.js';
import { HostPorts } from '../driver/ports/host-ports.js';
import { NetworkDriver } from '../driver/network-driver.js';
import { Ovsdb } from '../driver/ovs/ovsdb.js';
import { Vswitchd } from '../driver/ovs/vswitchd.js';
import { Tunnels } from '../driver/vxlan/tunnels.js';
import { Uplink } from '../driver/uplink/uplink.js';
import { HostIp } from '../driver/uplink/host-ip.js';
import { chooseDatapath, defaultRouteAddress, machineId, mtuOfAddress } from '../host/host-info.js';
import { hostNets } from '../host/host-nets.js';
import { Ipam } from '../ipam-driver/ipam.js';
import { Reclaimer } from '../ipam-driver/recovery/dead-host-reclaim.js';
import type { Reaper } from '../ipam-driver/recovery/orphan-reaper.js';
import { makeReaper } from './reaper.js';
import type { Logger } from '../lib/log.js';
import { spawner } from '../lib/exec.js';
import { Metrics } from '../metrics.js';
import { buildServer } from '../plugin-api/server.js';
import { cniFrontEnd, type CniFrontEnd } from '../cni/front-end.js';
import { HostRegistry } from '../cluster/hosts.js';
import { skippedRecords } from '../store/decode.js';
import { checkLayout } from '../store/layout.js';
import { storeUpgrade } from './store-upgrade.js';
import { describeStore, openStore } from '../store/open.js';
import { effectiveSettings, type Settings } from '../config/settings-view.js';
import { about } from './about.js';
import { OvsWatch, mgmtSocket } from './ovs-watch.js';
import { SwarmVips } from './swarm-vips.js';
import type { RemoteFamilies } from '../driver/groups/remote-family.js';
import type { TraceAnswerer } from '../cluster/traces.js';
import { peerParts } from './peer-parts.js';
import { hostResolvers } from '../host/resolvers.js';
import type { NetworkRecord } from '../driver/model/records.js';
import { FlowSync } from '../driver/ovs/flow-sync.js';
import { connectGauges } from './gauges.js';
import { Announcer } from '../driver/endpoint/announce.js';
import type { Store } from '../store/types.js';

/** Everything the daemon is made of, for daemon.ts to start and stop. */
export interface Parts {
  readonly config: Config;
  readonly log: Logger;
  /** Built when metrics are served (OVSNET_METRICS_ADDR), else undefined: prom-client is then never loaded. */
  readonly metrics: Metrics | undefined;
  /** The store as opened: loaded() says whether it could be opened at all. */
  readonly raw: ReturnType<typeof openStore>;
  /** The same store, every call timed. */
  readonly store: Store;
  readonly ipam: Ipam;
  readonly ovs: Ovsdb;
  readonly datapath: 'system' | 'netdev';
  /** After adding tunnels or repairing guard flows on the userspace datapath: drop cached flows. */
  readonly refreshDatapath: (() => Promise<void>) | undefined;
  /** Notices Open vSwitch restarts and puts ovsnet's state back (ovs-watch.ts). */
  readonly watch: OvsWatch;
  /** Announces joined endpoints' addresses (driver/endpoint/announce.ts). */
  readonly announcer: Announcer;
  readonly links: Links;
  readonly driver: NetworkDriver;
  readonly registry: HostRegistry;
  readonly tunnels: Tunnels;
  readonly reclaimer: Reclaimer;
  /** Releases this host's reservations whose holder is gone (ipam-driver/recovery/orphan-reaper.ts). */
  readonly reaper: Reaper;
  readonly app: FastifyInstance;
  /** The CNI front end; undefined with OVSNET_CNI_SOCKET=off. */
  readonly cni: CniFrontEnd | undefined;
  /** Swarm service VIPs (OVSNET_SCOPE=global only): swarm-vips.ts. */
  readonly swarmVips: SwarmVips | undefined;
  /** Answers peers' ovsnet trace requests (with etcd): src/cluster/traces.ts. */
  readonly traces: TraceAnswerer | undefined;
  /** The families of logical networks' groups on other hosts (with etcd): remote-family.ts. */
  readonly remoteGroups: RemoteFamilies | undefined;
}

/** `settings`: what the admin endpoint shows as in effect (main.ts reads them from the environment); `onCall`: told of each Docker call answered. */
export function assemble(config: Config, log: Logger, settings: Settings = effectiveSettings({}), onCall?: () => void): Parts {
  // Metrics first: the store, OVSDB and the server report to it. Its gauges are connected last.
  // With metrics off (no OVSNET_METRICS_ADDR) there are none and nothing is observed: no call,
  // store or OVSDB timing, and prom-client is not even loaded.
  const observed = config.metrics === undefined ? undefined : new Metrics();
  const raw = openStore(config.store, config.storeTimeoutMs, { log });
  const store: Store = observed === undefined ? raw : observed.instrument(raw);
  skippedRecords.log = log.child({ component: 'store' });
  const hostName = hostNameOf(config);
  const vtepIp = config.host.vtepIp === '' ? (defaultRouteAddress() ?? '') : config.host.vtepIp;
  const tunnelMtu = mtuOfAddress(vtepIp);
  const ipam = new Ipam({
    store,
    log: log.child({ component: 'ipam' }),
    host: hostName,
    defaultPools: config.defaultPools,
    hostNets: () => hostNets(),
    minPrefix: config.minPrefix,
    readyTimeoutMs: config.storeTimeoutMs,
    journal: config.journal,
    swarmScope: config.scope === 'global',
    // Docker's release keeps an address bound to an endpoint whose record exists: the driver's
    // records answer (made below; asked only once requests come).
    endpointExists: (endpointId: string, address: string): boolean | Promise<boolean> => driver.records.endpointExists(endpointId, address),
  });
  // Told when ovsdb-server goes away (its restart): made below, once the driver exists.
  let watch: OvsWatch | undefined = undefined;
  const ovs = new Ovsdb(
    config.ovsdb,
    config.storeTimeoutMs,
    observed === undefined ? undefined : (m, ok, s) => observed.observeOvsdb(m, ok, s),
    () => watch?.onOvsdbLost(),
  );
  const datapath = chooseDatapath(config.datapath);
  // The userspace datapath can keep flows cached from before a tunnel port existed: after adding
  // tunnels or after ovs-vswitchd restarted, they are dropped (Vswitchd.purgeFlows).
  const vswitchd = datapath === 'netdev' ? Vswitchd.besideOvsdb(config.ovsdb, config.storeTimeoutMs) : undefined;
  const refreshDatapath =
    vswitchd === undefined
      ? undefined
      : async (): Promise<void> => {
          await ovs.waitApplied();
          await vswitchd.purgeFlows();
        };
  const links = new Links();
  // Every child process (iptables, ovs-ofctl, ip) runs through this one, timed per program.
  const run = spawner(observed === undefined ? undefined : (program, ok, s) => observed.observeExec(program, ok, s));
  const openflow = new OpenFlow(run);
  // VXLAN tunnels follow peers (the registry), members (logical networks) and this host's
  // networks; the registry and the driver, made next, tell them of changes.
  const tunnels = new Tunnels({
    store,
    log: log.child({ component: 'tunnels' }),
    ovs,
    self: () => ({ name: hostName, vtepIp }),
    hosts: () => registry.hosts(),
    hostsLoaded: () => registry.names() !== undefined,
    networks: () => driver.localNetworks(),
    vxlanPort: config.vxlanPort,
    ...(refreshDatapath === undefined ? {} : { afterAdding: refreshDatapath }),
    onPortsChanged: () => remoteGroups?.tunnelsChanged(),
  });
  // Swarm's VIPs: dockerd balances them for its overlay driver only; ovsnet does it in OVS.
  const swarmVips: SwarmVips | undefined =
    config.scope !== 'global'
      ? undefined
      : new SwarmVips({
          log: log.child({ component: 'vips' }),
          socket: config.dockerSocket,
          networks: (): Promise<readonly NetworkRecord[]> => driver.localNetworks(),
          syncFlows: (): Promise<unknown> => driver.upkeep.syncFlows(),
          liveVteps: () => new Set([vtepIp, ...[...registry.hosts().values()].map((h) => h.vtepIp)]),
        });
  // What hosts sharing etcd do for each other: groups of logical networks, traces.
  const { remoteGroups, traces } = peerParts({
    config,
    store,
    log,
    hostName,
    vswitchd,
    hosts: () => registry.hosts(),
    syncFlows: () => driver.upkeep.syncFlows(),
  });
  // A joined endpoint's addresses, announced on the bridge's OpenFlow connection (the watch's).
  const announcer = new Announcer({ log: log.child({ component: 'announce' }), ovs, bridge: () => watch });
  const driver = new NetworkDriver({
    store,
    log: log.child({ component: 'driver' }),
    ovs,
    links,
    nat: new Nat(run, undefined, { file: IPV6_FORWARDING, log: log.child({ component: 'nat' }) }),
    hostPorts: new HostPorts(log.child({ component: 'ports' })),
    bridge: config.bridge,
    datapath: () => datapath,
    host: hostName,
    flows: new Flows(openflow),
    qos: new QosFlows(openflow, (bridge) => ovs.bridgeOfports(bridge)),
    groups: new GroupFlows(openflow),
    openflow: new FlowSync(openflow, (bridge) => mgmtSocket(config.ovsdb, bridge), config.storeTimeoutMs),
    pools: ipam,
    vtepIp,
    tunnelMtu: () => tunnelMtu,
    subnets: { minPrefix: config.minPrefix, hostNets: () => hostNets() },
    spareVeths: config.spareVeths,
    // Always there: without OVSNET_UPLINK it puts back the uplink of an earlier start, if any.
    uplink: new Uplink({ ovs, log: log.child({ component: 'uplink' }), bridge: config.bridge, name: config.uplink, ip: new HostIp(run) }),
    onNetworksChanged: () => tunnels.schedule(),
    scope: config.scope,
    ...(swarmVips === undefined ? {} : { vips: () => swarmVips.vips() }),
    ...(remoteGroups === undefined ? {} : { remoteGroups }),
    resolvers: () => hostResolvers(),
    announcer,
  });
  const registry = new HostRegistry({
    store,
    log: log.child({ component: 'hosts' }),
    self: { name: hostName, vtepIp, machineId: machineId(), ...(tunnelMtu === undefined ? {} : { tunnelMtu }) },
    ttlSeconds: config.host.ttlSeconds,
    onChange: (_hosts, changed) => {
      tunnels.peersChanged(changed);
      swarmVips?.hostsChanged();
    },
  });
  const reclaimer = new Reclaimer({
    store,
    log: log.child({ component: 'reclaim' }),
    self: hostName,
    hosts: () => registry.names(),
    graceMs: config.host.reclaimGraceSeconds * 1000,
    leaveLogical: (name, host) => leaveLogical(store, name, host, undefined),
    leavePool: (poolId, host) => ipam.leavePool(poolId, host),
  });
  const cni =
    config.cniSocket === ''
      ? undefined
      : cniFrontEnd(config.cniSocket, { store, host: hostName, log: log.child({ component: 'cni' }), driver, ipam, run });
  const reaper = makeReaper({
    config,
    store,
    log: log.child({ component: 'reap' }),
    host: hostName,
    ipam,
    driver,
    links,
    metrics: observed,
    cni: cni?.service,
  });
  const app = buildServer({
    log,
    ipam,
    driver,
    ...(observed === undefined ? {} : { metrics: observed }),
    ...(onCall === undefined ? {} : { onCall }),
    info: about(raw, describeStore(config.store), settings, swarmVips === undefined ? undefined : () => swarmVips.info()),
    // Never on a store of a newer layout (src/store/layout.ts): its OVS ports are not ours to remove.
    onActivate: () =>
      checkLayout(raw, storeUpgrade(raw))
        .then(() => driver.reconcile())
        .then((r) => observed?.observeRepairs(r.repaired.length, r.removed.length)),
  });
  watch = new OvsWatch({
    log: log.child({ component: 'ovs-watch' }),
    metrics: observed,
    upkeep: driver.upkeep,
    ovs,
    datapath,
    bridge: config.bridge,
    ovsdb: config.ovsdb,
    refreshDatapath,
    onRestarted: () => tunnels.schedule(),
    ...(swarmVips === undefined ? {} : { onMessage: (m: Buffer) => swarmVips.refusals.answer(m) }),
  });
  if (observed !== undefined) connectGauges(observed, { driver, ovs, openflow, log, hostName, ipam, registry, tunnels });
  return {
    config,
    log,
    metrics: observed,
    raw,
    store,
    ipam,
    ovs,
    datapath,
    refreshDatapath,
    watch,
    announcer,
    links,
    driver,
    registry,
    tunnels,
    reclaimer,
    reaper,
    app,
    cni,
    swarmVips,
    remoteGroups,
    traces,
  };
}
