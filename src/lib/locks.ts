/**
 * The one lock of the daemon: callers run one at a time, in arrival order, as a promise chain
 * (no timer, no queue object). A failed caller releases the lock like one that succeeded.
 */
export class Mutex {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn, fn);
    this.tail = result.catch(() => undefined);
    return result;
  }
}

/**
 * A Mutex per key (an address holder, a CNI attachment): callers of one key run one at a time,
 * other keys do not wait. A key's entry goes once its last caller ends, so keys that come and
 * go (container IDs) do not pile up.
 */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const result = (this.tails.get(key) ?? Promise.resolve()).then(fn, fn);
    const tail = result.catch(() => undefined);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }

  /** Keys with a caller running or waiting. */
  get size(): number {
    return this.tails.size;
  }
}
