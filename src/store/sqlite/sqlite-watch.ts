/**
 * The embedded store's watches. Every change is in the event log under its revision: a new
 * watch catches up from there, then the dispatcher delivers each later revision's events, this
 * process's own at once (after its transaction) and other processes' when a poll sees the
 * revision move. Each watcher gets each revision once, in order.
 */
import { OvsnetError } from '../../lib/errors.js';
import { prefixEnd } from '../keys.js';
import { currentRevision, groupByRevision, type EventRow, type Statements } from './sqlite-db.js';
import type { WatchEvent, WatchHandlers, Watcher } from '../types.js';

interface LocalWatcher {
  /** First revision this watcher wants. */
  from: number;
  prefix: string;
  end: string;
  handlers: WatchHandlers;
  closed: boolean;
}

export class SqliteWatches {
  private readonly watchers = new Set<LocalWatcher>();
  /** Highest revision whose events have been dispatched to watchers. */
  private dispatched: number;

  constructor(private readonly s: Statements) {
    this.dispatched = currentRevision(s);
  }

  /** True when `revision` has events not dispatched yet. */
  behind(revision: number): boolean {
    return revision > this.dispatched;
  }

  /** A watch of `prefix` from `fromRevision`; STORE_COMPACTED when that history is gone. */
  add(prefix: string, fromRevision: number, handlers: WatchHandlers): Watcher {
    const compacted = this.s.compacted.get()?.value ?? 0;
    if (fromRevision <= compacted) {
      throw new OvsnetError(
        'STORE_COMPACTED',
        `cannot watch ${prefix} from revision ${fromRevision}: history before ${compacted + 1} is compacted; read again and watch from the read's revision + 1`,
      );
    }
    const watcher: LocalWatcher = { from: fromRevision, prefix, end: prefixEnd(prefix), handlers, closed: false };
    // Catch up synchronously to the dispatcher's cursor; later revisions come from dispatch().
    // Nothing can run in between (single thread), so no revision is missed or seen twice.
    const backlog = this.s.eventsSince.all(Math.max(fromRevision - 1, compacted), this.dispatched);
    this.watchers.add(watcher);
    const batches = groupByRevision(backlog.filter((e) => inRange(e, watcher)));
    if (batches.length > 0) queueMicrotask(() => batches.forEach((b) => deliver(watcher, b)));
    return {
      close: () => {
        watcher.closed = true;
        this.watchers.delete(watcher);
        return Promise.resolve();
      },
    };
  }

  /** Delivers events of revisions after `dispatched` to every watcher. */
  dispatch(): void {
    let rows: EventRow[];
    let current: number;
    try {
      current = currentRevision(this.s);
      if (current <= this.dispatched) return;
      rows = this.s.eventsSince.all(this.dispatched, current);
    } catch {
      return; // a transient lock; the next poll retries
    }
    this.dispatched = current;
    for (const w of [...this.watchers]) {
      for (const batch of groupByRevision(rows.filter((e) => inRange(e, w)))) deliver(w, batch);
    }
  }

  /** Ends every watch with `err` (the store is closing). */
  endAll(err: Error): void {
    for (const w of this.watchers) w.handlers.onError?.(err);
    this.watchers.clear();
  }
}

function deliver(w: LocalWatcher, events: readonly WatchEvent[]): void {
  if (w.closed) return;
  try {
    w.handlers.onEvents(events);
  } catch (err) {
    w.handlers.onError?.(err instanceof Error ? err : new Error(String(err)));
  }
}

function inRange(e: EventRow, w: LocalWatcher): boolean {
  return e.rev >= w.from && e.key >= w.prefix && e.key < w.end;
}
