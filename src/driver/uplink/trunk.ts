/**
 * The driver's side of the uplink: VLAN networks on it hold the cluster's tag on this host's
 * bridge too, and the uplink's trunk carries exactly their tags (uplink/uplink.ts).
 */
import { ensureOwnBridge } from '../effects/bridge.js';
import { OvsnetError } from '../../lib/errors.js';
import type { DriverDeps } from '../effects/deps.js';
import type { DriverRecords } from '../records/driver-records.js';
import { claimTagStep } from '../records/tags.js';
import type { Undo } from '../model/undo.js';

/**
 * Network creation's step for a VLAN network on the uplink: this host's bridge uses the
 * cluster's tag, which no one-host network of this host may hold.
 */
export async function claimWireTagStep(
  deps: Pick<DriverDeps, 'store' | 'host'>,
  networkId: string,
  logical: string,
  tag: number,
  undo: Undo[],
): Promise<number> {
  try {
    return await claimTagStep(deps.store, deps.host, networkId, tag, undo);
  } catch (err) {
    if (!(err instanceof OvsnetError) || err.code !== 'TAG_TAKEN') throw err;
    throw new OvsnetError(
      'TAG_TAKEN',
      `logical network ${logical} is VLAN tag ${tag} on the physical network, and on this host that tag is taken (${err.message}): remove that network here (or recreate it with another -o ovsnet.tag) and try again`,
    );
  }
}

export class Trunk {
  constructor(
    private readonly deps: Pick<DriverDeps, 'uplink' | 'ovs' | 'bridge' | 'datapath' | 'openflow'>,
    private readonly records: DriverRecords,
  ) {}

  /** At start and reconcile: the uplink is the bridge's trunk carrying this host's VLAN networks. */
  async attach(): Promise<void> {
    if (this.deps.uplink === undefined) return;
    await ensureOwnBridge(this.deps);
    await this.deps.uplink.attach(await this.tags());
  }

  /** The uplink carries this host's VLAN networks' tags (and `extra`), and no other. */
  async carry(extra: readonly number[] = []): Promise<void> {
    await this.deps.uplink?.carry([...(await this.tags()), ...extra]);
  }

  /** Network creation's step: the uplink carries `tag` too; undone by carrying the others only. */
  async carryStep(tag: number, undo: Undo[]): Promise<void> {
    undo.push(() => this.carry());
    await this.carry([tag]);
  }

  private async tags(): Promise<number[]> {
    return (await this.records.localNetworks()).filter((n) => n.uplink !== undefined).map((n) => n.tag);
  }
}
