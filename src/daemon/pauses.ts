/**
 * When the daemon's safety-net work runs: in a pause of Docker's calls, not in a storm of them.
 * The bridge's flow check forks ovs-ofctl from the daemon, and a fork holds the daemon's thread
 * while it copies the daemon's page tables and until the child runs: in a 100-container storm on
 * a loaded 2-core host, 10 to 1,240 ms each (bench/cluster.ts's profile), three forks a check.
 * Such work runs at its period once Docker has been quiet for QUIET_MS, and never more than
 * MAX_DEFER_MS after its last run, however busy Docker is.
 */

/** Docker quiet this long: a pause. */
export const QUIET_MS = 2000;
/** The longest a check waits for a pause. */
export const MAX_DEFER_MS = 60_000;

export class Pauses {
  private lastCall = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly clock: () => number = () => performance.now(),
    private readonly quietMs = QUIET_MS,
    private readonly maxDeferMs = MAX_DEFER_MS,
  ) {}

  /** A Docker call was answered. */
  called(): void {
    this.lastCall = this.clock();
  }

  /** Whether work last done at `lastDone` (this clock's time) runs now: in a pause, or overdue. */
  due(lastDone: number): boolean {
    const now = this.clock();
    return now - this.lastCall >= this.quietMs || now - lastDone >= this.maxDeferMs;
  }

  /** This clock's time, for `due`'s lastDone. */
  now(): number {
    return this.clock();
  }
}
