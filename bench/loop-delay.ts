/**
 * ovsnet's event-loop delay, as its /metrics reports it. prom-client's default metrics keep a
 * perf_hooks monitorEventLoopDelay histogram and, at each scrape, publish its p50, p99 and max
 * as nodejs_eventloop_lag_{p50,p99,max}_seconds, then reset it: one scrape gives the delay over
 * the time since the previous one. The benches scrape at the edges of the windows they compare
 * (idle, a storm's starts, its removals), and nothing else scrapes the daemon meanwhile. Beside
 * each window, a bare Node.js process's own delay over the same time (LoopProbe): the baseline,
 * what the machine's load alone does to a loop.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { fmt } from './stats.js';

/**
 * prom-client samples the loop with a 10 ms timer (its eventLoopMonitoringPrecision default), and
 * each figure it reports is a whole timer interval: an idle loop reads about 10 ms. The benches
 * print the delay beyond those 10 ms, which is what held the loop up.
 */
export const LOOP_TIMER_MS = 10;

/** The delay beyond the timer from nanosecond figures (monitorEventLoopDelay's unit). */
const beyondTimer = (ns: number): number => Math.max(0, ns / 1e6 - LOOP_TIMER_MS);

/** Issue 27's target for the loop delay's p99 in a 100-container storm. */
export const LOOP_TARGET_P99_MS = 50;

export interface LoopDelay {
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

/** The delay beyond the timer since the previous scrape, from one scrape's text; NaN for a series missing. */
export function loopDelay(metricsText: string): LoopDelay {
  const ms = (figure: string): number => {
    const m = new RegExp(`^nodejs_eventloop_lag_${figure}_seconds (\\S+)$`, 'm').exec(metricsText);
    return m === null ? NaN : beyondTimer(Number(m[1]) * 1e9);
  };
  return { p50Ms: ms('p50'), p99Ms: ms('p99'), maxMs: ms('max') };
}

/** A bare Node.js process (loop-probe.ts) measuring its own loop, read at the benches' window edges. */
export class LoopProbe {
  private constructor(private readonly child: ChildProcess) {}

  static async start(): Promise<LoopProbe> {
    // In a session of its own, as the daemons beside it (test/harness/host.ts, Session): the
    // kernel's autogroup weighs it as one group, not as one task among the bench's clients.
    const child = fork(fileURLToPath(new URL('./loop-probe.js', import.meta.url)), [], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      detached: true,
    });
    await new Promise((resolve) => child.once('message', resolve));
    return new LoopProbe(child);
  }

  /** Its delay since the previous read (or its start); a new window begins. */
  async read(): Promise<LoopDelay> {
    const answer = new Promise<{ p50: number; p99: number; max: number }>((resolve) =>
      this.child.once('message', (m) => resolve(m as { p50: number; p99: number; max: number })),
    );
    this.child.send('read');
    const { p50, p99, max } = await answer;
    return { p50Ms: beyondTimer(p50), p99Ms: beyondTimer(p99), maxMs: beyondTimer(max) };
  }

  stop(): void {
    this.child.disconnect();
  }
}

export const LOOP_HEADERS = [
  'window',
  'ovsnet loop delay p50 ms',
  'p99 ms',
  'max ms',
  'bare Node process, same window: p99 / max ms [baseline]',
  `ovsnet p99 target <= ${LOOP_TARGET_P99_MS} ms`,
] as const;

/** One row of a loop-delay table; `judged` for the storm's windows (the target's), not the idle one. */
export function loopRow(window: string, ovsnet: LoopDelay, bare: LoopDelay, judged: boolean): string[] {
  const verdict = !judged ? '' : ovsnet.p99Ms <= LOOP_TARGET_P99_MS ? 'met' : 'NOT met';
  return [
    window,
    fmt(ovsnet.p50Ms, 1),
    fmt(ovsnet.p99Ms, 1),
    fmt(ovsnet.maxMs, 1),
    `${fmt(bare.p99Ms, 1)} / ${fmt(bare.maxMs, 1)}`,
    verdict,
  ];
}
