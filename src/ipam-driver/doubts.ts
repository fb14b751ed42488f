/**
 * Outcomes the store could not confirm. When a reservation's transaction times out, etcd may
 * still apply it (a frozen or partitioned etcd processes the request once it is back), while
 * Docker was told the request failed and will never release that address (or pool): a leak. When a
 * release times out, Docker treats the address as released (it only logs release errors): the
 * reservation would stay forever. So each such failure is remembered here and settled in the
 * background once the store answers again: a reservation or pool the failed request made (found
 * by its token) is released, a release is done again. Each settle step is idempotent.
 */
import { messageOf } from '../errors.js';
import type { Logger } from '../log.js';

export type Doubt =
  | { readonly kind: 'pool'; readonly token: string; readonly at: Date }
  | { readonly kind: 'request'; readonly poolId: string; readonly token: string; readonly at: Date }
  | { readonly kind: 'release'; readonly poolId: string; readonly address: string; readonly at: Date };

const FIRST_DELAY_MS = 500;
const MAX_DELAY_MS = 5_000;

export class Doubts {
  private readonly pending: Doubt[] = [];
  private timer: NodeJS.Timeout | undefined;
  private delayMs = FIRST_DELAY_MS;
  private stopped = false;

  constructor(
    private readonly settle: (d: Doubt) => Promise<void>,
    private readonly log: Logger,
  ) {}

  get size(): number {
    return this.pending.length;
  }

  add(d: Doubt): void {
    this.pending.push(d);
    this.log.warn({ doubt: d }, 'the store did not confirm an IPAM change; it is settled once the store answers');
    this.schedule();
  }

  /** Settles everything pending now; those that fail again stay. */
  async settleAll(): Promise<void> {
    for (const d of [...this.pending]) {
      try {
        await this.settle(d);
        this.pending.splice(this.pending.indexOf(d), 1);
      } catch (err) {
        this.log.debug({ err }, `cannot settle an unconfirmed IPAM change yet: ${messageOf(err)}`);
      }
    }
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(): void {
    if (this.timer !== undefined || this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.settleAll().then(() => {
        this.delayMs = this.pending.length === 0 ? FIRST_DELAY_MS : Math.min(this.delayMs * 2, MAX_DELAY_MS);
        if (this.pending.length > 0) this.schedule();
      });
    }, this.delayMs);
    this.timer.unref();
  }
}
