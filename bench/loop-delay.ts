/**
 * ovsnet's event-loop delay, as its /metrics reports it. prom-client's default metrics keep a
 * perf_hooks monitorEventLoopDelay histogram and, at each scrape, publish its p50, p99 and max
 * as nodejs_eventloop_lag_{p50,p99,max}_seconds, then reset it: one scrape gives the delay over
 * the time since the previous one. The benches scrape at the edges of the windows they compare
 * (idle, a storm's starts, its removals), and nothing else scrapes the daemon meanwhile.
 */
import { fmt } from './stats.js';

/**
 * prom-client samples the loop with a 10 ms timer (its eventLoopMonitoringPrecision default), and
 * each figure it reports is a whole timer interval: an idle loop reads about 10 ms. The benches
 * print the delay beyond those 10 ms, which is what held the loop up.
 */
export const LOOP_TIMER_MS = 10;

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
    return m === null ? NaN : Math.max(0, Number(m[1]) * 1000 - LOOP_TIMER_MS);
  };
  return { p50Ms: ms('p50'), p99Ms: ms('p99'), maxMs: ms('max') };
}

export const LOOP_HEADERS = ['window', 'loop delay p50 ms', 'p99 ms', 'max ms', `p99 target <= ${LOOP_TARGET_P99_MS} ms`] as const;

/** One row of a loop-delay table; `judged` for the storm's windows (the target's), not the idle baseline. */
export function loopRow(window: string, d: LoopDelay, judged: boolean): string[] {
  const verdict = !judged ? '' : d.p99Ms <= LOOP_TARGET_P99_MS ? 'met' : 'NOT met';
  return [window, fmt(d.p50Ms, 1), fmt(d.p99Ms, 1), fmt(d.maxMs, 1), verdict];
}
