/**
 * Joins Docker has not finished: the endpoints this daemon joined whose container end it has
 * not yet seen leave the host's namespace. Docker moves that end into the container when the
 * container's runtime runs libnetwork's hook, after Join has answered: milliseconds later on an
 * idle host, more than a minute later in a storm on a loaded one (the cluster test's 90
 * parallel starts lost containers to the reaper, which took their ends, still waiting on the
 * host, for ends moved back by containers that had gone). Until it moves, the end looks exactly
 * like one of an endpoint that left its container while ovsnet was down, so the reaper
 * (daemon/reaper.ts) judges an endpoint listed here only once it has seen its end placed.
 * Kept in memory: after a restart, every endpoint is judged by the grace period alone.
 */
export class Placements {
  /** Endpoint ID -> whether its Join has answered (false: under way, its veth may not exist yet), and since when listed. */
  private readonly waiting = new Map<string, { joined: boolean; at: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Runs a Join of `endpointId`: listed from before its veth exists; forgotten if the Join fails. */
  async join<T>(endpointId: string, run: () => Promise<T>): Promise<T> {
    this.waiting.set(endpointId, { joined: false, at: this.now() });
    try {
      const result = await run();
      this.waiting.set(endpointId, { joined: true, at: this.now() });
      return result;
    } catch (err) {
      this.waiting.delete(endpointId);
      throw err;
    }
  }

  /** The endpoint is gone (DeleteEndpoint). */
  forget(endpointId: string): void {
    this.waiting.delete(endpointId);
  }

  /**
   * Whether the reaper may judge the endpoint, told whether its container end is in the host's
   * namespace now: yes for one not listed; no for one listed, which leaves the list once its
   * Join has answered and its end is seen off the host (in its container: from then on, its end
   * back on the host means the container went).
   */
  judgeable(endpointId: string, endOnHost: boolean): boolean {
    const entry = this.waiting.get(endpointId);
    if (entry === undefined) return true;
    if (entry.joined && !endOnHost) this.waiting.delete(endpointId);
    return false;
  }

  /**
   * Forgets endpoints listed before `listedAt` that are not in `live` (a list of every endpoint
   * record read from `listedAt` on): their records went without a DeleteEndpoint here (a
   * network deleted with them, reconcile's stale endpoints). One listed later may have been
   * created after the read: it stays.
   */
  prune(live: ReadonlySet<string>, listedAt: number): void {
    for (const [id, entry] of this.waiting) if (entry.at < listedAt && !live.has(id)) this.waiting.delete(id);
  }

  /** How many are listed (tests, and a bound worth watching). */
  get size(): number {
    return this.waiting.size;
  }
}
