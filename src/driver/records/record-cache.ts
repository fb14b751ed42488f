/**
 * This process's copy of the network and endpoint records that Docker's per-container calls
 * read (CreateEndpoint, Join, ProgramExternalConnectivity, EndpointOperInfo twice): eight store
 * reads per container, each a round trip to etcd. These records are written only by this host's
 * driver (records carry the host; one ovsnet serves a host), so a copy taken from the store or
 * from the driver's own write stays true until the driver itself changes the key, and it says
 * so here: forget() before the store write (an unconfirmed write leaves no copy behind), set()
 * after it succeeded. A read that overlapped any change is not kept.
 */
export class RecordCache<T> {
  private readonly values = new Map<string, T>();
  /** Moves on every change: a read that started before one does not keep its result. */
  private generation = 0;

  /** The cached record of `key`, else `load()`'s (kept when found and nothing changed meanwhile). */
  async read(key: string, load: () => Promise<T | undefined>): Promise<T | undefined> {
    const hit = this.values.get(key);
    if (hit !== undefined) return hit;
    const generation = this.generation;
    const value = await load();
    if (value !== undefined && generation === this.generation) this.values.set(key, value);
    return value;
  }

  set(key: string, value: T): void {
    this.generation++;
    this.values.set(key, value);
  }

  forget(key: string): void {
    this.generation++;
    this.values.delete(key);
  }

  forgetPrefix(prefix: string): void {
    this.generation++;
    for (const key of this.values.keys()) if (key.startsWith(prefix)) this.values.delete(key);
  }

  get size(): number {
    return this.values.size;
  }
}
