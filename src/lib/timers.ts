/**
 * The daemon's timers, in one place: the retry loop of its background work (keepTrying: joining
 * the store, following a prefix, registering the host, reconciling with Open vSwitch), the bound
 * on a round trip (expireAfterIo) and a pass repeated at an interval (Repeater). None keeps the
 * process alive. keepTrying's delays are cockatiel's exponential backoff with decorrelated
 * jitter (about 1 s, 2 s, 4 s ... up to 30 s), so that hosts that lost etcd together do not
 * retry in lockstep. The loop is ours, not cockatiel's retry policy (which sleeps through an
 * abort and calls once more): the sleep ends at once on abort and nothing is tried after it.
 */
import type { IBackoff } from 'cockatiel';
import { requirePackage } from './packages.js';

export interface RetryOptions {
  /** The owner's stop: no attempt starts after it, and a pending wait ends at once. */
  readonly signal: AbortSignal;
  /** Each failure (not after an abort), with the wait before the next attempt. */
  readonly onFailure: (err: unknown, delayMs: number) => void;
  /** Wait one delay before the first attempt too (starting over after something was lost). */
  readonly delayFirst?: boolean;
  /** Median of the first delay; 1 s unless given (a test, a caller whose retries cannot wait long). */
  readonly initialDelayMs?: number;
  /** No delay is longer; 30 s unless given. */
  readonly maxDelayMs?: number;
}

/** The delays of one run of retries: jittered, growing to the cap. */
export function backoffDelays(initialDelayMs = 1000, maxDelayMs = 30_000): () => number {
  let backoff: IBackoff<unknown> | undefined;
  const { ExponentialBackoff } = requirePackage('cockatiel');
  const factory = new ExponentialBackoff({ initialDelay: initialDelayMs, maxDelay: maxDelayMs });
  return () => {
    backoff = backoff === undefined ? factory.next() : backoff.next(undefined);
    return backoff.duration;
  };
}

/** Resolves after `ms`, or at once when `signal` aborts; never keeps the process alive. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    timer.unref();
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * Runs `fn` until it resolves: true then, false if `signal` aborted first. Never rejects; each
 * failure goes to `onFailure`, which says so in the log.
 */
export async function keepTrying(fn: () => Promise<unknown>, o: RetryOptions): Promise<boolean> {
  const next = backoffDelays(o.initialDelayMs, o.maxDelayMs);
  if (o.delayFirst === true) await sleep(next(), o.signal);
  for (;;) {
    if (o.signal.aborted) return false;
    try {
      await fn();
      return true;
    } catch (err) {
      if (o.signal.aborted) return false;
      const delayMs = next();
      o.onFailure(err, delayMs);
      await sleep(delayMs, o.signal);
    }
  }
}

/** A wait for a log line: "1.4 s". */
export function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

/**
 * Timers for bounds on round trips. A loop turn runs timers before I/O: after the process was
 * busy (or starved of CPU) past a bound, the bound's timer and the answer are both due, and a
 * plain setTimeout would report a timeout for an answer already waiting in the socket. The
 * callback here runs after that turn's I/O (setImmediate), so an answer that came in time wins.
 */
export function expireAfterIo(ms: number, expire: () => void): NodeJS.Timeout {
  return setTimeout(() => setImmediate(expire), ms);
}

/**
 * A background pass repeated at an interval (reclaim, reap): the next starts after the last ends.
 * stop() during a pass lets that pass finish and starts no other.
 */
export class Repeater {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  /** `pass` every `intervalMs`, the first one interval from now; a failed pass goes to `onError`. */
  start(intervalMs: number, pass: () => Promise<unknown>, onError: (err: unknown) => void): void {
    this.stopped = false;
    const next = () => {
      if (!this.stopped) this.timer = setTimeout(tick, intervalMs).unref();
    };
    const tick = () => {
      pass().then(next, (err: unknown) => {
        onError(err);
        next();
      });
    };
    next();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }
}
