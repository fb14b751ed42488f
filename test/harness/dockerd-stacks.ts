/**
 * What a hung dockerd is doing, for a failure's message: its goroutine dump (dockerd writes one
 * on SIGUSR1 and names the file in its log), read for the one deadlock known in this machine's
 * Docker. In 20.10.24 libnetwork's processEndpointDelete takes the controller's lock, then a
 * network's; getSvcRecords (a container leaving) takes the network's, then the controller's.
 * Once two meet, every network operation of that dockerd waits forever: moby/moby#46661, fixed
 * by libnetwork#2679 in 20.10.27. ovsnet is not called in it, and cannot end it.
 */

export interface Goroutine {
  readonly id: string;
  /** What it waits on: `semacquire, 2 minutes`, `select`, `IO wait`. */
  readonly state: string;
  /** Function names, innermost first, without arguments. */
  readonly frames: readonly string[];
}

/** The goroutines of a dump (Go's format: a `goroutine N [state]:` line, then two lines a frame). */
export function parseStacks(dump: string): Goroutine[] {
  return dump.split(/\n\s*\n/).flatMap((block) => {
    const lines = block.trim().split('\n');
    const head = /^goroutine (\d+) \[([^\]]*)\]:$/.exec(lines[0] ?? '');
    if (head === null) return [];
    const frames = lines
      .slice(1)
      .filter((l) => !l.startsWith('\t') && !l.startsWith('created by '))
      .map((l) => l.replace(/\([^()]*\)$/, ''));
    return [{ id: head[1] ?? '', state: head[2] ?? '', frames }];
  });
}

/** Goroutines waiting for a mutex inside libnetwork: the ones a network hang is made of. */
export function blockedInLibnetwork(goroutines: readonly Goroutine[]): Goroutine[] {
  return goroutines.filter((g) => g.state.startsWith('semacquire') && g.frames.some((f) => f.includes('libnetwork')));
}

/** The pair of moby/moby#46661, when both wait for a mutex: [processEndpointDelete's, getSvcRecords']. */
export function svcRecordsDeadlock(goroutines: readonly Goroutine[]): [Goroutine, Goroutine] | undefined {
  const waiting = blockedInLibnetwork(goroutines);
  const deleting = waiting.find((g) => g.frames.some((f) => f.endsWith('.processEndpointDelete')));
  const reading = waiting.find((g) => g.frames.some((f) => f.endsWith('.getSvcRecords')));
  return deleting === undefined || reading === undefined ? undefined : [deleting, reading];
}

/** A few lines for a failure's message: the verdict, then what libnetwork's waiters wait in. */
export function describeStacks(dump: string, file: string): string {
  const goroutines = parseStacks(dump);
  const waiting = blockedInLibnetwork(goroutines);
  const pair = svcRecordsDeadlock(goroutines);
  const verdict =
    pair === undefined
      ? `${goroutines.length} goroutines, ${waiting.length} waiting for a mutex in libnetwork`
      : `dockerd is deadlocked in libnetwork: goroutine ${pair[0].id} (processEndpointDelete) and ${pair[1].id} (getSvcRecords) ` +
        "wait for each other's lock (moby/moby#46661, fixed in Docker 20.10.27); every network operation of this dockerd hangs, ovsnet's calls included";
  const lines = waiting.slice(0, 8).map((g) => {
    const inside = g.frames.filter((f) => f.includes('libnetwork')).slice(0, 3);
    return `  goroutine ${g.id} [${g.state}]: ${inside.join(' < ')}`;
  });
  return [`--- dockerd's goroutines (${file}) ---`, verdict, ...lines].join('\n');
}
