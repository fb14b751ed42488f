/**
 * Keeps a lease alive: one keep-alive every TTL/3, so two may fail before the lease expires.
 * When the lease is found expired (the store was unreachable for longer than the TTL), the
 * keeper reports it through `onLost` and stops: the owner decides whether to re-register,
 * since everything put under the old lease is gone.
 */
import { isOvsnetError } from '../lib/errors.js';
import type { LeaseId, Store } from '../store/types.js';

export interface LeaseKeeperEvents {
  readonly onLost: (err: Error) => void;
  /** A keep-alive failed but the lease may still be alive. */
  readonly onRetry?: (err: Error) => void;
}

export class LeaseKeeper {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  private constructor(
    private readonly store: Store,
    readonly lease: LeaseId,
    private readonly ttlSeconds: number,
    private readonly events: LeaseKeeperEvents,
  ) {}

  static async start(store: Store, ttlSeconds: number, events: LeaseKeeperEvents): Promise<LeaseKeeper> {
    const keeper = new LeaseKeeper(store, await store.grantLease(ttlSeconds), ttlSeconds, events);
    keeper.schedule();
    return keeper;
  }

  /** Stops renewing; with `revoke`, the lease and its keys go at once (else at expiry). */
  async stop(revoke: boolean): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    if (revoke) await this.store.revokeLease(this.lease);
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.tick(), (this.ttlSeconds * 1000) / 3);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    try {
      await this.store.keepAlive(this.lease);
    } catch (err) {
      if (this.stopped) return;
      if (isOvsnetError(err, 'STORE_LEASE_NOT_FOUND')) {
        this.stopped = true;
        this.events.onLost(err);
        return;
      }
      this.events.onRetry?.(err instanceof Error ? err : new Error(String(err)));
    }
    this.schedule();
  }
}
