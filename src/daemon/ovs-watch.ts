/**
 * Open vSwitch restarts, noticed as they happen and answered at once. ovs-vswitchd: its OpenFlow
 * connection to ovsnet's bridge drops (driver/ovs/of-watch.ts); when it serves the bridge again,
 * ovsnet puts back its whole OpenFlow state (meters over one OpenFlow connection, then every flow
 * in one bundle: driver/ovs/flow-sync.ts) and the gateway addresses the
 * userspace datapath lost (Upkeep.afterOvsRestart), then logs what it restored and how long it
 * took. On the kernel datapath, flow-restore-wait is set while ovs-vswitchd is away so that it
 * comes back keeping the datapath's flows (established traffic goes on) and waits for ovsnet's
 * rules; ovsnet clears it once they are in. ovsdb-server: its JSON-RPC connection drops; ovsnet
 * dials until it answers, then checks the flows (nothing should have changed). After either, the
 * VXLAN tunnels are compared with OVS's ports again (onRestarted: their full sync). Each restart is
 * counted (ovsnet_ovs_restarts_total), the reprogram timed (ovsnet_reprogram_seconds).
 */
import path from 'node:path';
import { messageOf } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import type { Metrics } from '../metrics.js';
import { OpenFlowWatch } from '../driver/ovs/of-watch.js';
import type { DatapathType } from '../driver/ovs/ovsdb.js';
import type { OvsApi } from '../driver/effects/deps.js';
import type { Upkeep } from '../driver/upkeep/upkeep.js';

export interface OvsWatchParts {
  readonly log: Logger;
  /** Undefined when metrics are not served. */
  readonly metrics: Pick<Metrics, 'observeOvsRestart' | 'observeReprogram'> | undefined;
  readonly upkeep: Pick<Upkeep, 'afterOvsRestart' | 'syncFlows' | 'onVswitchdAway'>;
  readonly ovs: Pick<OvsApi, 'bridgeExists' | 'flowRestoreWait' | 'setFlowRestoreWait'>;
  readonly datapath: DatapathType;
  readonly bridge: string;
  /** OVSNET_OVSDB: the management socket sits beside a unix one; with tcp: nothing is watched here. */
  readonly ovsdb: string;
  /** After the flows are back: the userspace datapath's cached flows dropped (assemble.ts). */
  readonly refreshDatapath: (() => Promise<void>) | undefined;
  readonly retryMs?: number;
  /** After either restart, once the switch answers again: what OVS holds is read again (the tunnels' full sync). */
  readonly onRestarted?: () => void;
  /** Messages of the switch on the watch connection, answered (of-watch.ts): the VIP refusals. */
  readonly onMessage?: (message: Buffer) => Buffer | undefined;
}

/** The bridge's management socket beside a unix OVSDB socket; undefined for tcp: (another machine's). */
export function mgmtSocket(ovsdb: string, bridge: string): string | undefined {
  return ovsdb.startsWith('unix:') ? path.join(path.dirname(ovsdb.slice('unix:'.length)), `${bridge}.mgmt`) : undefined;
}

export class OvsWatch {
  private readonly openflow: OpenFlowWatch | undefined;
  private lostAt: number | undefined;
  /** One reprogram at a time; a restart during one runs another after it. */
  private running: Promise<void> | undefined;
  private again = false;
  private ovsdbLost = false;
  private stopped = false;

  constructor(private readonly parts: OvsWatchParts) {
    const socket = mgmtSocket(parts.ovsdb, parts.bridge);
    this.openflow =
      socket === undefined
        ? undefined
        : new OpenFlowWatch({
            socket,
            onLost: () => this.vswitchdLost(),
            onBack: () => this.vswitchdBack(),
            ...(parts.onMessage === undefined ? {} : { onMessage: parts.onMessage }),
            ...(parts.retryMs === undefined ? {} : { retryMs: parts.retryMs }),
          });
  }

  /** The OpenFlow connection to the bridge: its version (undefined while down, or with tcp: OVSDB), and a way to send on it. */
  get openflowVersion(): number | undefined {
    return this.openflow?.version;
  }

  send(messages: readonly Buffer[]): boolean {
    return this.openflow?.send(messages) ?? false;
  }

  start(): void {
    if (this.openflow === undefined)
      this.parts.log.info(`OVSNET_OVSDB is ${this.parts.ovsdb}: ovs-vswitchd restarts are noticed by the periodic check only`);
    this.openflow?.start();
  }

  stop(): void {
    this.stopped = true;
    this.openflow?.stop();
  }

  /** Resolves once no reprogram is running (tests, stop). */
  async idle(): Promise<void> {
    while (this.running !== undefined) await this.running;
  }

  /** The start's reconcile is done: a flow-restore-wait left by an ovsnet that stopped mid-restart is cleared. */
  async afterReconcile(): Promise<void> {
    if (await this.parts.ovs.flowRestoreWait()) {
      await this.parts.ovs.setFlowRestoreWait(false);
      this.parts.log.info('flow-restore-wait was set (an ovs-vswitchd restart while ovsnet was away): flows are in, cleared');
    }
  }

  /** ovsdb.ts's connection to ovsdb-server was lost. */
  onOvsdbLost(): void {
    if (this.ovsdbLost || this.stopped) return;
    this.ovsdbLost = true;
    const t0 = Date.now();
    this.parts.log.warn('the connection to ovsdb-server was lost (restarting?): dialling until it answers');
    const probe = (): void => {
      if (this.stopped) return;
      this.parts.ovs.bridgeExists(this.parts.bridge).then(
        async () => {
          this.ovsdbLost = false;
          this.parts.metrics?.observeOvsRestart('ovsdb-server');
          this.parts.onRestarted?.();
          const synced = await this.parts.upkeep.syncFlows().catch(() => undefined);
          this.parts.log.info(
            { awaySeconds: (Date.now() - t0) / 1000, openflowChanges: synced?.modifications },
            'ovsdb-server answers again',
          );
        },
        () => setTimeout(probe, Date.now() - t0 < 60_000 ? 100 : 1000).unref(),
      );
    };
    probe();
  }

  private vswitchdLost(): void {
    this.lostAt = Date.now();
    this.parts.log.warn(`ovs-vswitchd closed the OpenFlow connection of ${this.parts.bridge} (restarting?)`);
    this.parts.upkeep.onVswitchdAway().then(
      (made) => made && this.parts.log.info(`bridge ${this.parts.bridge} made fail_mode=secure while ovs-vswitchd is away`),
      (err: unknown) => this.parts.log.warn({ err }, `cannot make ${this.parts.bridge} secure: ${messageOf(err)}`),
    );
    if (this.parts.datapath !== 'system') return;
    // The kernel keeps forwarding with the datapath's flows; a starting ovs-vswitchd keeps them too, until ovsnet's rules are in.
    this.parts.ovs
      .setFlowRestoreWait(true)
      .catch((err: unknown) => this.parts.log.warn({ err }, `cannot set flow-restore-wait: ${messageOf(err)}`));
  }

  /** ovs-vswitchd serves the bridge again: one restart, reprogrammed (once more if one is running). */
  private vswitchdBack(): void {
    this.parts.metrics?.observeOvsRestart('ovs-vswitchd');
    this.schedule();
  }

  private schedule(): void {
    if (this.running !== undefined) {
      this.again = true;
      return;
    }
    this.running = this.reprogram().finally(() => {
      this.running = undefined;
      if (this.again && !this.stopped) {
        this.again = false;
        this.schedule();
      }
    });
  }

  private async reprogram(): Promise<void> {
    const { log, metrics, upkeep } = this.parts;
    const backAt = Date.now();
    try {
      const r = await upkeep.afterOvsRestart();
      metrics?.observeReprogram(r.flowsSeconds);
      if (this.parts.datapath === 'system') await this.parts.ovs.setFlowRestoreWait(false);
      await this.parts.refreshDatapath?.();
      this.parts.onRestarted?.();
      log.info(
        {
          awaySeconds: this.lostAt === undefined ? undefined : (backAt - this.lostAt) / 1000,
          reprogramSeconds: r.flowsSeconds,
          flows: r.synced.flows,
          meters: r.synced.meters,
          openflowChanges: r.synced.modifications,
          repaired: r.repaired,
        },
        `ovs-vswitchd restarted: ${r.synced.flows} flows and ${r.synced.meters} meters back on ${this.parts.bridge} in ${Math.round(r.flowsSeconds * 1000)} ms`,
      );
    } catch (err) {
      log.warn({ err }, `cannot program ${this.parts.bridge} again after ovs-vswitchd restarted: ${messageOf(err)}; retrying in 1 s`);
      setTimeout(() => !this.stopped && this.schedule(), 1000).unref();
    }
  }
}
