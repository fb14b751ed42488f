/**
 * A CreateEndpoint that comes after the reaper freed its address. The reaper frees a Docker
 * request's reservation that no CreateEndpoint bound on two sweeps a grace period apart
 * (orphan-reaper.ts, `never bound`: dockerd stopped between the two calls). On a host loaded
 * enough, Docker's CreateEndpoint can still come after that; bound the usual way it would find no
 * reservation, and its container would run on an address ovsnet could hand out again. So the
 * addresses reaped as never bound are remembered (in memory, for an hour, at most REAPED_LIMIT of them)
 * and such a CreateEndpoint reserves its address again for its endpoint. When another holder has
 * it by then, the CreateEndpoint is refused, saying so, and Docker's release of the address that
 * follows the refusal frees nothing (a tombstone in memory takes it).
 */
import { OvsnetError, isOvsnetError } from '../../lib/errors.js';
import type { Logger } from '../../lib/log.js';
import type { Store } from '../../store/types.js';
import { readReservation } from '../state/ipam-reads.js';
import { describeHolder, type Reservation } from '../state/records.js';
import { holders } from '../state/holder-keys.js';
import type { Tombstones } from '../state/tombstones.js';
import { bindReservation } from './bind-endpoint.js';
import type { AddressRequest } from './allocator.js';
import type { EndpointExists } from './release-guard.js';

/** How long an address reaped as never bound may still be asked for by its CreateEndpoint. */
export const REAPED_KEEP_MS = 3600_000;
/** How many such addresses are remembered at most (the oldest go first). */
export const REAPED_LIMIT = 4096;

const idOf = (poolId: string, address: string) => `${poolId}\0${address}`;

/** The addresses reaped as never bound lately: pool and plain address -> when. */
export class ReapedUnbound {
  private readonly at = new Map<string, number>();

  constructor(private readonly now: () => Date) {}

  note(poolId: string, address: string): void {
    const id = idOf(poolId, address);
    this.at.delete(id);
    this.at.set(id, this.now().getTime());
    if (this.at.size > REAPED_LIMIT) this.at.delete(this.at.keys().next().value ?? '');
  }

  /** The reaper's release did not happen after all. */
  drop(poolId: string, address: string): void {
    this.at.delete(idOf(poolId, address));
  }

  /** The one of `poolIds` whose reservation of `address` was reaped as never bound lately (taken: asked for once). */
  take(poolIds: readonly string[], address: string): string | undefined {
    const since = this.now().getTime() - REAPED_KEEP_MS;
    for (const poolId of poolIds) {
      const id = idOf(poolId, address);
      const at = this.at.get(id);
      if (at === undefined) continue;
      this.at.delete(id);
      if (at >= since) return poolId;
    }
    return undefined;
  }
}

export interface BinderDeps {
  readonly store: Store;
  readonly log: Logger;
  readonly host: string;
  readonly now: () => Date;
  /** Where a refused endpoint's tombstone goes: Docker's next release of its address frees nothing. */
  readonly tombstones: Pick<Tombstones, 'add'>;
  /** Whether an endpoint's record exists (the driver's answer): a binding of a live endpoint is never taken (bind-endpoint.ts). */
  readonly endpointExists?: EndpointExists;
}

/** What the binder asks of the IPAM. */
export interface BinderIpam {
  /** A reservation's transaction, its count or block with it. */
  requestAddress(req: AddressRequest): Promise<unknown>;
  releaseIf(poolId: string, address: string, onlyIf: (r: Reservation) => boolean): Promise<boolean>;
  /** The pools whose subnet holds the address (the IPAM index); undefined while it is not loaded. */
  poolsHolding(address: string): readonly string[] | undefined;
}

/** CreateEndpoint's binding and the reaper's release, for the IPAM (Ipam.bindEndpoint, Ipam.reap). */
export class Binder {
  private readonly reaped: ReapedUnbound;

  constructor(
    private readonly deps: BinderDeps,
    private readonly ipam: BinderIpam,
  ) {
    this.reaped = new ReapedUnbound(deps.now);
  }

  /** Marks the reservation of `address` with `endpointId`; one reaped as never bound is reserved again, or refused. */
  async bind(address: string, endpointId: string): Promise<boolean> {
    const plain = address.split('/')[0] ?? '';
    const found = await bindReservation(this.deps.store, plain, endpointId, this.ipam.poolsHolding(plain), this.deps.endpointExists);
    if (found.bound) return true;
    const poolId = this.reaped.take(found.unreserved, plain);
    return poolId !== undefined && this.bindAgain(poolId, plain, endpointId);
  }

  /** The reaper's release; the address of a request never bound is remembered for its CreateEndpoint. */
  async reap(poolId: string, address: string, onlyIf: (r: Reservation) => boolean, neverBound: boolean): Promise<boolean> {
    // Noted before the release: a CreateEndpoint that reads the reservation gone finds the note.
    if (neverBound) this.reaped.note(poolId, address);
    let released = false;
    try {
      released = await this.ipam.releaseIf(poolId, address, onlyIf);
      return released;
    } finally {
      if (!released) this.reaped.drop(poolId, address);
    }
  }

  /** Reserves `address` of pool `poolId` again for `endpointId` and binds it; refuses (IPAM_ADDRESS_TAKEN) when another holder has it now. */
  private async bindAgain(poolId: string, address: string, endpointId: string): Promise<boolean> {
    const { deps } = this;
    try {
      await this.ipam.requestAddress({ poolId, address, gateway: false, holder: holders.dockerEndpoint(endpointId) });
    } catch (err) {
      if (!isOvsnetError(err) || err.code !== 'IPAM_ADDRESS_TAKEN') throw err;
      const taken = await readReservation(deps.store, poolId, address).catch(() => undefined);
      deps.tombstones.add({ poolId, address, endpoint: endpointId, host: deps.host, at: deps.now().toISOString() });
      throw new OvsnetError(
        'IPAM_ADDRESS_TAKEN',
        `endpoint ${endpointId.slice(0, 12)}: its address ${address} was freed before Docker's CreateEndpoint came (no CreateEndpoint had bound it on two reaper sweeps a grace period apart, OVSNET_REAP_GRACE) and is now held by ${taken === undefined ? 'another request' : describeHolder(taken.record)}; start the container again: Docker then asks for a new address`,
      );
    }
    deps.log.warn(
      { poolId, address, endpointId },
      `address ${address} reserved again for endpoint ${endpointId.slice(0, 12)}: its CreateEndpoint came after the reaper had freed it as never bound (a loaded host; OVSNET_REAP_GRACE sets how long the reaper waits)`,
    );
    return (await bindReservation(deps.store, address, endpointId, [poolId], deps.endpointExists)).bound;
  }
}
