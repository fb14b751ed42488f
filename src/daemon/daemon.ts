/**
 * The daemon's life: assemble (assemble.ts), start, stop. Starting listens on the plugin socket
 * first, then starts a named list of background tasks; stopping runs a named list of closers,
 * in order. main.ts owns the process: argv, signals and the exit status.
 */
import type http from 'node:http';
import type { Config } from '../config/config.js';
import type { Links } from '../driver/links/links.js';
import { messageOf, OvsnetError } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import { listenOnSocket, removeSocket } from '../plugin-api/listen.js';
import { keepTrying } from '../lib/timers.js';
import { layoutChecked } from '../store/layout.js';
import { describeStore } from '../store/open.js';
import type { Settings } from '../config/settings-view.js';
import { VERSION } from '../lib/version.js';
import { assemble, type Parts } from './assemble.js';
import { storeUpgrade } from './store-upgrade.js';
import { reapIntervalMs } from './reaper.js';
import { exposedCollector, HeapWatch, settleAfterStart } from './memory.js';
import { Pauses } from './pauses.js';

/**
 * How often the bridge's OpenFlow state is compared with the records and put right: a safety net
 * (flows deleted by hand, OVS reached over tcp:), restarts are noticed at once (ovs-watch.ts).
 * A check waits for a pause in Docker's calls, at most a minute (pauses.ts).
 */
const FLOW_CHECK_MS = 10_000;

/** Something started in the background once the socket answers; named for the reader. */
interface Task {
  readonly name: string;
  readonly start: () => void;
}

/** One step of stopping, in the order they run. */
interface Closer {
  readonly name: string;
  readonly close: () => unknown;
}

/** Before any exit: the link worker must close its netlink sockets first (links.ts); bounded. */
function closeLinks(links: Links): Promise<unknown> {
  return Promise.race([links.close(), new Promise((r) => setTimeout(r, 2000).unref())]);
}

export class Daemon {
  private readonly parts: Parts;
  /** Aborted when stopping: the background tasks' retries end. */
  private readonly retries = new AbortController();
  private flowChecks: NodeJS.Timeout | undefined;
  /** Docker's calls, for the work that waits for a pause in them. */
  private readonly pauses = new Pauses();
  /** Collections between bursts (memory.ts). */
  private readonly heapWatch = new HeapWatch(exposedCollector());
  private metricsServer: http.Server | undefined;
  private stopping: Promise<void> | undefined;

  constructor(config: Config, log: Logger, settings?: Settings) {
    this.parts = assemble(config, log, settings, () => this.pauses.called());
  }

  /**
   * Listens on the plugin socket, then starts the background work and resolves: the store and
   * Open vSwitch are reached in the background, retried until they answer. `onFatal` is called
   * when the store cannot even be opened, with the cleanup (socket removed, link worker closed)
   * that must end before the process exits.
   */
  async start(onFatal: (err: unknown, cleanedUp: Promise<void>) => void): Promise<void> {
    const { config, log, metrics, datapath, app } = this.parts;
    // Listen first, reach the store in the background: Docker must never wait on a dead socket.
    await listenOnSocket(app, config.socket);
    this.metricsServer =
      config.metrics === undefined || metrics === undefined
        ? undefined
        : await metrics.listen(config.metrics.host, config.metrics.port, log);
    // CNI is an extra: a socket it cannot have is logged, and Docker is served without it.
    if (this.parts.cni !== undefined)
      await listenOnSocket(this.parts.cni.app, this.parts.cni.socket, 'OVSNET_CNI_SOCKET').catch((err: unknown) =>
        log.error({ err }, `no CNI front end: cannot listen on ${this.parts.cni?.socket ?? ''} (${messageOf(err)})`),
      );
    for (const task of this.tasks(onFatal)) task.start();
    // startupMs: from process start to the socket answering (Docker's first call waits on it).
    log.info(
      {
        version: VERSION,
        store: describeStore(config.store),
        socket: config.socket,
        bridge: config.bridge,
        datapath,
        pid: process.pid,
        startupMs: Math.round(performance.now()),
      },
      `ovsnet ${VERSION} serving`,
    );
  }

  /**
   * After an exception nobody caught (main.ts): nothing in this process is trusted any more, so
   * nothing is finished; the socket goes and the link worker closes its netlink sockets
   * (bounded), then main exits. What matters is in the store; the next start reconciles.
   */
  async abandon(): Promise<void> {
    removeSocket(this.parts.config.socket);
    if (this.parts.cni !== undefined) removeSocket(this.parts.cni.socket);
    await closeLinks(this.parts.links).catch(() => undefined);
  }

  /** Finishes the requests in flight and closes everything, in order; once, however often called. */
  stop(signal: string): Promise<void> {
    this.stopping ??= this.close(signal);
    return this.stopping;
  }

  private tasks(onFatal: (err: unknown, cleanedUp: Promise<void>) => void): readonly Task[] {
    const { config, log, raw, links } = this.parts;
    /** Runs `fn` in the background until it succeeds, saying each failure. */
    const retried = (name: string, fn: () => Promise<unknown>): Task => ({
      name,
      start: () =>
        void keepTrying(fn, {
          signal: this.retries.signal,
          onFailure: (err) => log.warn({ err }, `cannot ${name} yet (${messageOf(err)}); retrying`),
        }),
    });
    // The process leaves. The reason is given at once, before the cleanup: a SIGTERM arriving
    // meanwhile must not end the process without it.
    const fatal = (err: unknown): void => {
      const cleanedUp = (async () => {
        removeSocket(config.socket);
        if (this.parts.cni !== undefined) removeSocket(this.parts.cni.socket);
        await closeLinks(links).catch(() => undefined);
      })();
      onFatal(err, cleanedUp);
    };
    // The store's layout first (src/store/layout.ts): a store of a newer layout is fatal before
    // any background work (reconciling OVS with what the store says) acts on it.
    const layoutOk = raw.loaded().then(
      () =>
        layoutChecked(raw, fatal, {
          signal: this.retries.signal,
          upgrade: storeUpgrade(raw),
          onFailure: (err) => log.warn({ err }, `cannot check the store's layout yet (${messageOf(err)}); retrying`),
        }),
      () => false,
    );
    const afterLayout = (task: Task): Task => ({
      name: task.name,
      start: () => void layoutOk.then((ok) => ok && !this.retries.signal.aborted && task.start()),
    });
    return [
      {
        name: 'open the store',
        // A store that cannot even be opened (an unwritable file) is fatal.
        start: () => void raw.loaded().catch(fatal),
      },
      ...this.background(retried, fatal).map(afterLayout),
    ];
  }

  /** The daemon's own work on the store and Open vSwitch, started once the store's layout is checked. */
  private background(retried: (name: string, fn: () => Promise<unknown>) => Task, fatal: (err: unknown) => void): Task[] {
    const { config, log, ipam, tunnels, registry, reclaimer, reaper, driver, metrics, refreshDatapath, watch } = this.parts;
    return [
      { name: 'load the IPAM index', start: () => ipam.start() },
      retried('follow logical networks', () => tunnels.start()),
      retried("follow other hosts' networks (groups of logical networks)", async () => this.parts.remoteGroups?.start()),
      retried("answer peers' trace requests", async () => this.parts.traces?.start()),
      { name: 'follow Open vSwitch restarts', start: () => watch.start() },
      { name: "follow the Engine's swarm services (VIPs)", start: () => this.parts.swarmVips?.start() },
      {
        name: "check the bridge's flows",
        start: () => {
          let checked = this.pauses.now();
          this.flowChecks = setInterval(() => {
            if (!this.pauses.due(checked)) return;
            checked = this.pauses.now();
            driver.upkeep
              .syncFlows()
              .then(async (r) => {
                if (r.modifications === 0) return;
                log.warn({ changes: r.modifications }, "the bridge's OpenFlow state was not ovsnet's (changed by hand?): put right");
                metrics?.observeRepairs(r.modifications, 0);
                await refreshDatapath?.();
              })
              .catch((err: unknown) => log.debug({ err }, `cannot check the bridge's flows: ${messageOf(err)}`));
          }, FLOW_CHECK_MS).unref();
        },
      },
      // A sweep every tenth of the grace period (at most 30 s, at least 1 s).
      {
        name: 'reclaim departed hosts',
        start: () => reclaimer.start(Math.min(Math.max(config.host.reclaimGraceSeconds * 100, 1000), 30_000)),
      },
      { name: 'reap reservations whose holder is gone', start: () => reaper.start(reapIntervalMs(config)) },
      retried('register this host', () => registry.start()),
      retried('undo CNI ADDs cut short', async () => void (await this.parts.cni?.service.recover())),
      retried('reconcile with Open vSwitch', () =>
        driver
          .reconcile()
          .then((r) => metrics?.observeRepairs(r.repaired.length, r.removed.length))
          .then(() => watch.afterReconcile())
          .then(() => settleAfterStart(exposedCollector(), log))
          .then(() => this.heapWatch.start())
          .catch((err: unknown) => {
            // An OVSNET_UPLINK that cannot be the uplink refuses the start, with the reason.
            if (!(err instanceof OvsnetError) || err.code !== 'UPLINK_INVALID') throw err;
            fatal(err);
          }),
      ),
    ];
  }

  private closers(): readonly Closer[] {
    const { app, ipam, reclaimer, reaper, tunnels, registry, driver, ovs, links, store, cni } = this.parts;
    return [
      { name: 'CNI socket (requests in flight)', close: () => cni?.app.close().then(() => removeSocket(cni.socket)) },
      { name: 'plugin API (requests in flight)', close: () => app.close() },
      { name: 'background retries', close: () => this.retries.abort() },
      { name: 'metrics server', close: () => this.metricsServer?.close() },
      { name: 'IPAM', close: () => ipam.stop() },
      { name: 'reclaimer', close: () => reclaimer.stop() },
      { name: 'reaper', close: () => reaper.stop() },
      { name: 'OpenFlow checks', close: () => clearInterval(this.flowChecks) },
      { name: 'heap checks', close: () => this.heapWatch.stop() },
      { name: 'Open vSwitch watch', close: () => this.parts.watch.stop() },
      { name: 'endpoint announcements', close: () => this.parts.announcer.stop() },
      { name: "the Engine's swarm services", close: () => this.parts.swarmVips?.stop() },
      { name: 'tunnels', close: () => tunnels.stop().catch(() => undefined) },
      { name: "other hosts' networks", close: () => this.parts.remoteGroups?.stop().catch(() => undefined) },
      { name: 'trace requests', close: () => this.parts.traces?.stop().catch(() => undefined) },
      // Deregistered at once: peers drop this host now, not at the TTL.
      { name: 'host registration', close: () => registry.stop(true).catch(() => undefined) },
      { name: 'driver calls in flight', close: () => driver.settled() },
      { name: 'spare veths', close: () => driver.dropSpares() },
      { name: 'OVSDB connection', close: () => ovs.close() },
      { name: 'link worker', close: () => closeLinks(links) },
      { name: 'store', close: () => store.close() },
    ];
  }

  /** The closers in order; one that fails ends the sequence (as before), the socket goes anyway. */
  private async close(signal: string): Promise<void> {
    const { config, log } = this.parts;
    log.info({ signal }, 'stopping: finishing requests in flight');
    try {
      for (const step of this.closers()) {
        try {
          await step.close();
        } catch (err) {
          log.warn({ err }, `cannot close the ${step.name} (${messageOf(err)})`);
          throw err;
        }
      }
    } finally {
      removeSocket(config.socket);
      log.info('stopped');
    }
  }
}
