#!/usr/bin/env node
/**
 * The composition root: the only reader of process.env, signals and the socket path.
 *   ovsnet serve    run the plugin (Docker's NetworkDriver and IpamDriver on OVSNET_SOCKET)
 *   ovsnet status|networks|endpoints|ipam|doctor [--json]    the operator's view
 */
import fs from 'node:fs';
import os from 'node:os';
import { loadConfig, type Config } from './config.js';
import { COMMANDS, isCommand, runCommand } from './cli/commands.js';
import { isOvsnetError, messageOf } from './errors.js';
import { Links } from './driver/links/links.js';
import { Nat } from './driver/nat.js';
import { NetworkDriver } from './driver/network-driver.js';
import { Ovsdb, type DatapathType } from './driver/ovs/ovsdb.js';
import { hostRoutes } from './ipam-driver/host-routes.js';
import { Ipam } from './ipam-driver/ipam.js';
import { createLogger } from './log.js';
import { Metrics, type PoolUsage } from './metrics.js';
import { defaultRouteAddress, machineId, mtuOfAddress } from './host-info.js';
import { Flows } from './driver/ovs/flows.js';
import { leaveLogical } from './driver/vxlan/logical.js';
import { Tunnels } from './driver/vxlan/tunnels.js';
import { Vswitchd } from './driver/ovs/vswitchd.js';
import { Reclaimer } from './ipam-driver/reclaim.js';
import { HostRegistry } from './store/hosts.js';
import type { Store } from './store/types.js';
import { listenOnSocket, removeSocket } from './plugin-api/listen.js';
import { buildServer } from './plugin-api/server.js';
import { describeStore, openStore } from './store/open.js';

const USAGE = `usage: ovsnet <command> [--json]

commands:
  serve       run the plugin: Docker's NetworkDriver and IpamDriver on OVSNET_SOCKET
${Object.entries(COMMANDS).map(([c, d]) => `  ${c.padEnd(10)}  ${d}`).join('\n')}

Settings are OVSNET_* environment variables; see the README.`;

/** How often the gateway guard flows of logical networks are checked (and put back if lost). */
const GUARD_CHECK_MS = 10_000;

async function serve(config: Config): Promise<void> {
  const log = createLogger(config.logLevel);
  const raw = openStore(config.store, config.storeTimeoutMs);
  // The IPAM usage gauges read the index at scrape time; `ipam` exists by then.
  const metrics: Metrics = new Metrics(
    (): PoolUsage[] => ipam.usage().map((u) => ({ pool: u.pool, used: u.count, capacity: u.capacity })),
    () => ({
      hosts: registry.hosts().size,
      tunnels: tunnels.count,
      blocks: ipam.usage().flatMap((u) => (u.blocks === undefined ? [] : [{ pool: u.pool, owned: u.blocks.filter((b) => b.host === hostName).length }])),
    }),
  );
  const store: Store = metrics.instrument(raw);
  const hostName = config.host.name === '' ? os.hostname() : config.host.name;
  const vtepIp = config.host.vtepIp === '' ? (defaultRouteAddress() ?? '') : config.host.vtepIp;
  const tunnelMtu = mtuOfAddress(vtepIp);
  const ipam: Ipam = new Ipam({
    store,
    log: log.child({ component: 'ipam' }),
    host: hostName,
    defaultPools: config.defaultPools,
    hostRoutes: () => hostRoutes(),
    readyTimeoutMs: config.storeTimeoutMs,
    journal: config.journal,
  });
  const ovs = new Ovsdb(config.ovsdb, config.storeTimeoutMs, (m, ok, s) => metrics.observeOvsdb(m, ok, s));
  // auto: the kernel datapath when its module is loaded, else the userspace one.
  const datapath: DatapathType =
    config.datapath === 'auto' ? (fs.existsSync('/sys/module/openvswitch') ? 'system' : 'netdev') : config.datapath;
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
  const driver = new NetworkDriver({
    store,
    log: log.child({ component: 'driver' }),
    ovs,
    links,
    nat: new Nat(),
    bridge: config.bridge,
    datapath: () => datapath,
    host: hostName,
    flows: new Flows(),
    pools: ipam,
    vtepIp,
    tunnelMtu: () => tunnelMtu,
    onNetworksChanged: () => tunnels.schedule(),
  });
  const app = buildServer({
    log,
    ipam,
    driver,
    metrics,
    onActivate: () => driver.reconcile().then((r) => metrics.observeRepairs(r.repaired.length, r.removed.length)),
  });
  /** Before any exit: the link worker must close its netlink sockets first (links.ts); bounded. */
  const closeLinks = () => Promise.race([links.close(), new Promise((r) => setTimeout(r, 2000).unref())]);
  // Listen first, reach the store in the background: Docker must never wait on a dead socket.
  await listenOnSocket(app, config.socket);
  raw.loaded().catch((err: unknown) => {
    // A store that cannot even be opened (an unwritable file) is fatal: say so and leave.
    process.stderr.write(`ovsnet: ${messageOf(err)}\n`);
    removeSocket(config.socket);
    void closeLinks().finally(() => process.exit(1));
  });
  ipam.start();
  /** Runs `fn` in the background until it succeeds, backing off from 1 s to 30 s. */
  const keepTrying = (what: string, fn: () => Promise<unknown>, delayMs = 1000): void => {
    fn().catch((err: unknown) => {
      log.warn({ err }, `cannot ${what} yet (${messageOf(err)}); retrying`);
      setTimeout(() => keepTrying(what, fn, Math.min(delayMs * 2, 30_000)), delayMs).unref();
    });
  };
  const registry = new HostRegistry({
    store,
    log: log.child({ component: 'hosts' }),
    self: { name: hostName, vtepIp, machineId: machineId(), ...(tunnelMtu === undefined ? {} : { tunnelMtu }) },
    ttlSeconds: config.host.ttlSeconds,
  });
  // VXLAN tunnels follow peers (the registry), members (logical networks) and this host's networks.
  const tunnels: Tunnels = new Tunnels({
    store,
    log: log.child({ component: 'tunnels' }),
    ovs,
    self: () => ({ name: hostName, vtepIp }),
    hosts: () => registry.hosts(),
    networks: () => driver.localNetworks(),
    ...(refreshDatapath === undefined ? {} : { afterAdding: refreshDatapath }),
  });
  registry.onChange = () => tunnels.schedule();
  const reclaimer = new Reclaimer({
    store,
    log: log.child({ component: 'reclaim' }),
    self: hostName,
    hosts: () => registry.names(),
    graceMs: config.host.reclaimGraceSeconds * 1000,
    leaveLogical: (name, host) => leaveLogical(store, name, host, undefined),
    leavePool: (poolId, host) => ipam.leavePool(poolId, host),
  });
  keepTrying('follow logical networks', () => tunnels.start());
  // ovs-vswitchd keeps no OpenFlow rules across a restart: check the gateway guards now and then.
  const guards = setInterval(() => {
    driver
      .checkGuards()
      .then(async (repaired) => {
        metrics.observeRepairs(repaired.length, 0);
        if (repaired.length > 0) await refreshDatapath?.();
      })
      .catch((err: unknown) => log.debug({ err }, `cannot check the gateway guard flows: ${messageOf(err)}`));
  }, GUARD_CHECK_MS).unref();
  // A sweep every tenth of the grace period (at most 30 s, at least 1 s).
  reclaimer.start(Math.min(Math.max(config.host.reclaimGraceSeconds * 100, 1000), 30_000));
  keepTrying('register this host', () => registry.start());
  const metricsServer = config.metrics === undefined ? undefined : await metrics.listen(config.metrics.host, config.metrics.port);
  keepTrying('reconcile with Open vSwitch', () => driver.reconcile().then((r) => metrics.observeRepairs(r.repaired.length, r.removed.length)));
  // startupMs: from process start to the socket answering (Docker's first call waits on it).
  log.info(
    { store: describeStore(config.store), socket: config.socket, bridge: config.bridge, datapath, pid: process.pid, startupMs: Math.round(performance.now()) },
    'ovsnet serving',
  );

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping: finishing requests in flight');
    try {
      await app.close();
      metricsServer?.close();
      await ipam.stop();
      reclaimer.stop();
      clearInterval(guards);
      await tunnels.stop().catch(() => undefined);
      await registry.stop(true).catch(() => undefined);
      await driver.settled();
      ovs.close();
      await closeLinks();
      await store.close();
    } finally {
      removeSocket(config.socket);
      log.info('stopped');
      process.exit(0);
    }
  };
  process.once('SIGTERM', (s) => void stop(s));
  process.once('SIGINT', (s) => void stop(s));
}

async function main(argv: readonly string[]): Promise<number | undefined> {
  const [command] = argv;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return command === undefined ? 2 : 0;
  }
  let config: Config;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    process.stderr.write(`ovsnet: ${messageOf(err)}\n`);
    return 2;
  }
  if (command === 'serve') {
    await serve(config);
    return undefined; // keeps running until a signal
  }
  if (isCommand(command)) {
    const extra = argv.slice(1).filter((a) => a !== '--json');
    if (extra.length > 0) {
      process.stderr.write(`ovsnet: ${command} takes only --json, not ${extra.join(' ')}\n`);
      return 2;
    }
    return runCommand(command, argv.includes('--json'), config);
  }
  process.stderr.write(`ovsnet: unknown command ${JSON.stringify(command)}\n${USAGE}\n`);
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code !== undefined) process.exit(code);
  },
  (err: unknown) => {
    process.stderr.write(`ovsnet: ${isOvsnetError(err) ? `${err.code}: ` : ''}${messageOf(err)}\n`);
    process.exit(1);
  },
);
