/**
 * Follows the keys under a prefix: a snapshot, then a watch from the revision after it. When the
 * watch ends (a lost stream, a compacted revision) it starts over with a new snapshot and watch,
 * retried with jittered backoff (about 1 s growing to 30 s, src/lib/timers.ts) until that works or
 * stop() is called. No change is missed: each snapshot replaces everything the owner knew.
 *
 * Idempotency: start() once; stop() any number of times. The owner keeps no watcher of its own.
 */
import { messageOf } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import { keepTrying, seconds } from '../lib/timers.js';
import { decodeOrSkip, skippedRecords } from './decode.js';
import type { KeyValue, Store, WatchEvent, Watcher } from './types.js';

export interface FollowOptions {
  readonly store: Store;
  readonly prefix: string;
  readonly log: Logger;
  /** What is followed, for log lines ("hosts", "logical networks"). */
  readonly what: string;
  /** Everything under the prefix now: replaces what the owner knew. */
  readonly onSnapshot: (kvs: readonly KeyValue[]) => void;
  readonly onEvents: (events: readonly WatchEvent[]) => void;
  /** The watch ended: what the owner knows may be stale until the next onSnapshot. */
  readonly onLost?: () => void;
  /** Follow again at once after a lost watch (later failures still back off). */
  readonly againAtOnce?: boolean;
}

export class Follower {
  private watcher: Watcher | undefined;
  /** Aborted by stop(): ends a pending retry. */
  private readonly stopping = new AbortController();
  /** Bumped by each start and each ended watch: a stale watch's callbacks are ignored. */
  private generation = 0;

  constructor(private readonly o: FollowOptions) {}

  /** The first snapshot and watch; fails if the store cannot give them (the caller retries). */
  async start(): Promise<void> {
    const gen = ++this.generation;
    const current = () => !this.stopping.signal.aborted && gen === this.generation;
    // A start again after a partial failure (a retried registry start): the old watch goes.
    const previous = this.watcher;
    this.watcher = undefined;
    await previous?.close();
    const snapshot = await this.o.store.list(this.o.prefix);
    if (!current()) return;
    this.o.onSnapshot(snapshot.kvs);
    const watcher = await this.o.store.watch(this.o.prefix, snapshot.revision + 1, {
      // Called from the store's socket or poll handler: nothing thrown here may escape (it would
      // end the process). An owner that fails on an event may have applied part of it: its view
      // is rebuilt from a new snapshot, as after a lost watch.
      onEvents: (events) => {
        if (!current()) return;
        try {
          this.o.onEvents(events);
        } catch (err) {
          this.o.log.error({ err }, `cannot apply a change of ${this.o.what} (${messageOf(err)}); reading them again`);
          this.restart();
        }
      },
      onError: (err) => {
        if (!current()) return;
        this.o.log.warn({ err }, `the watch of ${this.o.what} ended (${messageOf(err)}); following again`);
        this.restart();
      },
    });
    if (!current()) {
      await watcher.close(); // stopped, or it ended already (and a new start is scheduled)
      return;
    }
    this.watcher = watcher;
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    const w = this.watcher;
    this.watcher = undefined;
    await w?.close();
  }

  /** The watch is over: the owner hears so, and a new snapshot and watch follow. */
  private restart(): void {
    this.generation++;
    this.o.onLost?.();
    void this.watcher?.close().catch(() => undefined);
    this.watcher = undefined;
    this.again();
  }

  /** Starts over after a wait, and again after each failure, until it works or stop(). */
  private again(): void {
    void keepTrying(() => this.start(), {
      signal: this.stopping.signal,
      delayFirst: this.o.againAtOnce !== true,
      onFailure: (err, delayMs) =>
        this.o.log.warn({ err }, `cannot follow ${this.o.what} yet (${messageOf(err)}); retrying in ${seconds(delayMs)}`),
    });
  }
}

/**
 * The JSON records under a prefix, by name (the key after the prefix), kept by a Follower. A
 * malformed record is skipped (decode.ts says so once); a good one that turns bad is dropped.
 * onChange hears the names the events touched, or undefined after a snapshot (any may have).
 */
export class FollowedRecords<T> {
  readonly records = new Map<string, T>();
  /** True once the first snapshot is in. */
  loaded = false;
  private readonly follower: Follower;

  constructor(
    o: Omit<FollowOptions, 'onSnapshot' | 'onEvents'> & {
      readonly nameOf?: (rest: string) => string;
      readonly onChange: (names: readonly string[] | undefined) => void;
    },
  ) {
    const name = (key: string) => (o.nameOf ?? ((r: string) => r))(key.slice(o.prefix.length));
    this.follower = new Follower({
      ...o,
      onSnapshot: (kvs) => {
        this.records.clear();
        for (const kv of kvs) {
          const record = decodeOrSkip<T>(kv.key, kv.value);
          if (record !== undefined) this.records.set(name(kv.key), record);
        }
        this.loaded = true;
        o.onChange(undefined);
      },
      onEvents: (events) => {
        const names: string[] = [];
        for (const e of events) {
          const record = e.type === 'put' ? decodeOrSkip<T>(e.kv.key, e.kv.value) : undefined;
          const n = name(e.kv.key);
          names.push(n);
          if (record !== undefined) this.records.set(n, record);
          else {
            this.records.delete(n);
            if (e.type === 'delete') skippedRecords.cleared(e.kv.key);
          }
        }
        o.onChange(names);
      },
    });
  }

  start(): Promise<void> {
    return this.follower.start();
  }

  stop(): Promise<void> {
    return this.follower.stop();
  }
}
