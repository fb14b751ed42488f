/**
 * The driver's upkeep: bringing OVS, the kernel and the bridge's flows in line with the records
 * at start and on Plugin.Activate (reconcile), now and then (syncFlows) and after ovs-vswitchd
 * restarted (afterOvsRestart). Each runs under the driver's port mutex, never beside a request
 * that changes ports.
 */
import { messageOf } from '../../lib/errors.js';
import type { Mutex } from '../../lib/locks.js';
import type { DriverDeps } from '../effects/deps.js';
import type { SpareVeths } from '../endpoint/spares.js';
import type { Changes } from '../ovs/flow-sync.js';
import type { Publisher } from '../ports/publishing.js';
import type { Trunk } from '../uplink/trunk.js';
import type { OpenFlowState, SyncReport } from './openflow-state.js';
import type { Reconciler } from './reconcile.js';

export interface UpkeepParts {
  readonly ports: Mutex;
  readonly trunk: Trunk;
  readonly reconciler: Reconciler;
  readonly spares: SpareVeths;
  readonly publisher: Publisher;
  readonly flows: OpenFlowState;
}

/** What afterOvsRestart() did: the flows' sync, how long until they were back, and reconcile's repairs. */
export interface RestartReport {
  readonly synced: SyncReport;
  readonly flowsSeconds: number;
  readonly repaired: readonly string[];
}

export class Upkeep {
  constructor(
    private readonly deps: Pick<DriverDeps, 'ovs' | 'bridge' | 'log'>,
    private readonly parts: UpkeepParts,
  ) {}

  /** After a restart of ovsnet: OVS and the kernel as the store says (Reconciler), published ports held, flows synced. */
  reconcile(): Promise<{ repaired: string[]; removed: string[] }> {
    const { ports, trunk, reconciler, spares, publisher, flows } = this.parts;
    return ports.run(async () => {
      await trunk.attach();
      const done = await reconciler.reconcile();
      done.removed.push(...(await spares.sweep()));
      await publisher.republish();
      // A sync that fails (ovs-ofctl missing, OpenFlow14 not allowed) must not stop the rest:
      // said once here, tried again by the periodic check.
      try {
        const secured = await flows.secure();
        if (secured) done.repaired.push(`fail_mode=secure on ${this.deps.bridge}`);
        const synced = await flows.sync();
        if (synced.modifications > 0) done.repaired.push(`${synced.modifications} OpenFlow changes`);
        if (secured || synced.modifications > 0) {
          this.deps.log.info(
            { secured, openflowChanges: synced.modifications, flows: synced.flows, meters: synced.meters },
            `put ${this.deps.bridge}'s OpenFlow state in line`,
          );
        }
      } catch (err) {
        this.deps.log.warn({ err }, `cannot bring the bridge's OpenFlow state in line: ${messageOf(err)}`);
      }
      return done;
    });
  }

  /** The bridge's OpenFlow state made what the records say (openflow-state.ts). */
  syncFlows(): Promise<SyncReport> {
    return this.parts.ports.run(() => this.parts.flows.sync());
  }

  /** ovs-vswitchd went away (OvsWatch): the bridge made secure for its return (OpenFlowState.secureWhileAway). */
  onVswitchdAway(): Promise<boolean> {
    return this.parts.flows.secureWhileAway();
  }

  /** What syncFlows() would change; undefined without OpenFlow access. A read. */
  diffFlows(): Promise<Changes | undefined> {
    return this.parts.ports.run(() => this.parts.flows.diff());
  }

  /**
   * After ovs-vswitchd restarted (it keeps no flows or meters, and the userspace datapath makes
   * its internal ports anew): the flows first, in one bundle, then reconcile (gateway addresses).
   */
  afterOvsRestart(): Promise<RestartReport> {
    const { ports, reconciler, flows } = this.parts;
    return ports.run(async () => {
      const t0 = performance.now();
      await this.deps.ovs.waitApplied(); // every port has its OpenFlow number again
      const synced = await flows.sync();
      const flowsSeconds = (performance.now() - t0) / 1000;
      const { repaired } = await reconciler.reconcile();
      return { synced, flowsSeconds, repaired };
    });
  }
}
