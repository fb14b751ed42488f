/**
 * The daemon's memory after its start. Start-up reads every record once (the IPAM index, the
 * reconcile's lists of networks and endpoints): with 10k endpoints that is ~50 MiB of objects
 * dead a second later, promoted to V8's old generation, which V8 then keeps (and grows further
 * from) for as long as the daemon is idle: RSS 180 MiB where 17 MiB is live. One full collection
 * once the start-up reconcile is done gives it back.
 *
 * The collector is V8's, exposed by --expose-gc: ovsnet's launchers pass it with
 * --max-semi-space-size and --optimize-for-size (plugin/config.json's entrypoint,
 * deploy/ovsnet.service, scripts/start.sh); a daemon started without it skips the collection,
 * and says so at debug. --optimize-for-size puts V8's heap in its memory-first policy: between
 * its own collections the old generation grows by smaller steps ("conservative" growing), and
 * a collection compacts pages at a lower fragmentation. Over 100-container storms it cost no
 * CPU the storms could separate; the RSS fell by 3-5 MiB empty and its peaks at 10k records by
 * a third (docs/benchmarks.md).
 */
import type { Logger } from '../lib/log.js';

export type Collect = () => void;

/** V8's collector, when the process was started with --expose-gc (`gc` on the global object). */
export function exposedCollector(global: { readonly gc?: unknown } = globalThis): Collect | undefined {
  const gc = global.gc;
  return typeof gc === 'function' ? () => void (gc as () => unknown)() : undefined;
}

/** One full collection after start-up, logged with the heap before and after; false when there is no collector. */
export function settleAfterStart(
  collect: Collect | undefined,
  log: Pick<Logger, 'debug'>,
  heapUsed: () => number = () => process.memoryUsage().heapUsed,
): boolean {
  if (collect === undefined) {
    log.debug('no collection after start-up: node was started without --expose-gc (ovsnet serve is run with it by its launchers)');
    return false;
  }
  const before = heapUsed();
  collect();
  log.debug({ heapUsedMiB: [mib(before), mib(heapUsed())] }, 'collected what start-up read');
  return true;
}

const mib = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10;

/** How often the heap is looked at between bursts. */
export const HEAP_CHECK_MS = 30_000;
/** Growth always allowed over twice what the last collection left. */
const HEAP_FLOOR = 16 * 2 ** 20;

/**
 * The heap's bound between collections: twice what the last one left (which grows with the
 * records this process keeps: the IPAM index, the record copy), plus 16 MiB.
 */
export const heapBound = (liveAfterLast: number): number => 2 * liveAfterLast + HEAP_FLOOR;

/**
 * Between bursts. V8 grows its old generation during a burst of requests (10k endpoints made:
 * 160 MiB RSS, 20 live) and keeps it while the daemon then idles. Every HEAP_CHECK_MS the heap
 * used is compared with heapBound(): over it, one collection runs (some ms on a heap of tens of
 * MiB), and what it leaves is the next bound's base. Nothing runs without a collector.
 */
export class HeapWatch {
  private timer: NodeJS.Timeout | undefined;
  private live: number;

  constructor(
    private readonly collect: Collect | undefined,
    private readonly heapUsed: () => number = () => process.memoryUsage().heapUsed,
  ) {
    this.live = heapUsed();
  }

  start(everyMs = HEAP_CHECK_MS): void {
    if (this.collect === undefined || this.timer !== undefined) return;
    this.live = this.heapUsed();
    this.timer = setInterval(() => this.check(), everyMs).unref();
  }

  /** One look; true when it collected. */
  check(): boolean {
    if (this.collect === undefined || this.heapUsed() <= heapBound(this.live)) return false;
    this.collect();
    this.live = this.heapUsed();
    return true;
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
