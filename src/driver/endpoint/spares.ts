/**
 * Spare veth pairs (OVSNET_SPARE_VETHS): a pair DeleteEndpoint releases is kept, down and
 * renamed to a spare slot's names, and the next Join renames it instead of creating one
 * (links/spare-ops.ts says why). At most `capacity` pairs are kept; past that, or when a pair
 * cannot be parked (its container end did not come back), it is deleted; a spare that cannot be
 * adopted is deleted and the Join creates a pair anew: a spare never fails a Join. Every call
 * runs under the driver's port mutex, and the link worker answers in order, so a Join right
 * behind a DeleteEndpoint finds the pair it parked. Spares carry SPARE_ALIAS (reconcile's orphan
 * sweep leaves them to sweep() here) and go when ovsnet stops (drop()); a crash's leftovers go
 * at the next start's reconcile (sweep()).
 */
import { messageOf } from '../../lib/errors.js';
import type { Logger } from '../../lib/log.js';
import type { LinksApi } from '../effects/deps.js';
import type { VethSpec } from '../links/links.js';
import type { SpareNames } from '../links/spare-ops.js';

/** The alias of a spare's host end. */
export const SPARE_ALIAS = 'ovsnet-spare';

/** Slot k's names: `ovsph<k>` / `ovspc<k>` (no endpoint's ovh/ovc name looks like them). */
export const spareNames = (k: number): SpareNames => ({ host: `ovsph${k}`, container: `ovspc${k}` });

export class SpareVeths {
  /** Parked or being parked, oldest first: each resolves to its slot, or undefined if the park failed. */
  private readonly ready: Promise<number | undefined>[] = [];
  /** Slots in use (parked, or being parked). */
  private readonly taken = new Set<number>();

  constructor(
    private readonly links: LinksApi,
    private readonly capacity: number,
    private readonly log: Logger,
  ) {}

  /** How many pairs are kept or being parked. */
  get size(): number {
    return this.taken.size;
  }

  /**
   * A veth pair for `spec`: a spare renamed, when there is one, else a new pair (createVeth).
   * Same outcome and same failures as createVeth.
   */
  async createVeth(spec: VethSpec): Promise<void> {
    for (let next = this.ready.shift(); next !== undefined; next = this.ready.shift()) {
      const k = await next;
      if (k === undefined) continue;
      const spare = spareNames(k);
      try {
        await this.links.adoptVeth(spare, spec);
        return;
      } catch (err) {
        this.log.warn({ err }, `cannot reuse spare veth ${spare.host}: ${messageOf(err)}; creating a new pair`);
      } finally {
        this.taken.delete(k);
      }
    }
    await this.links.createVeth(spec);
  }

  /**
   * Takes a released pair (already off the bridge, named in no record): parked in a free slot,
   * else deleted. Returns the kernel work, for the caller not to wait for (it resolves either way;
   * a pair it could not delete is logged, and reconcile removes it).
   */
  release(host: string, container: string): Promise<void> {
    const k = this.freeSlot();
    if (k === undefined) return this.delete(host);
    this.taken.add(k);
    const parked = this.links.parkVeth(host, container, spareNames(k), SPARE_ALIAS).then(
      async (ok) => {
        if (ok) return k;
        this.taken.delete(k);
        await this.delete(host);
        return undefined;
      },
      (err: unknown) => {
        this.taken.delete(k);
        this.log.warn({ err }, `cannot keep veth ${host} as a spare: ${messageOf(err)}; it was deleted`);
        return undefined;
      },
    );
    this.ready.push(parked);
    return parked.then(() => undefined);
  }

  /** Deletes every spare (ovsnet stopping). */
  async drop(): Promise<void> {
    const slots = (await Promise.all(this.ready.splice(0))).filter((k) => k !== undefined);
    for (const k of slots) {
      await this.delete(spareNames(k).host);
      this.taken.delete(k);
    }
  }

  /** Deletes links carrying SPARE_ALIAS that are no slot's in use (a crash's leftovers); returns their names. */
  async sweep(): Promise<string[]> {
    const mine = new Set([...this.taken].map((k) => spareNames(k).host));
    const removed: string[] = [];
    for (const link of await this.links.aliased(SPARE_ALIAS)) {
      if (link.alias !== SPARE_ALIAS || mine.has(link.name)) continue;
      await this.links.deleteLink(link.name);
      removed.push(link.name);
    }
    return removed;
  }

  private freeSlot(): number | undefined {
    for (let k = 0; k < this.capacity; k++) if (!this.taken.has(k)) return k;
    return undefined;
  }

  private delete(host: string): Promise<void> {
    return this.links
      .deleteLink(host)
      .catch((err: unknown) => this.log.warn({ err }, `cannot delete veth ${host}: ${messageOf(err)}; the next reconcile removes it`));
  }
}
