/**
 * What a Node process with the daemon's flags holds before ovsnet does anything
 * (rss-floor-child.ts): the floor under the daemon's empty RSS. Median of BENCH_FLOOR_RUNS (3).
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { median } from './stats.js';

const CHILD = fileURLToPath(new URL('./rss-floor-child.js', import.meta.url));

export interface RssFloor {
  readonly bare: number;
  readonly modules: number;
  readonly withWorker: number;
}

export function rssFloor(flags: readonly string[]): RssFloor {
  const runs = Array.from({ length: Number(process.env.BENCH_FLOOR_RUNS ?? 3) }, () => {
    const args = [...flags.filter((f) => !f.startsWith('--cpu-prof')), '--expose-gc', CHILD];
    return JSON.parse(execFileSync(process.execPath, args, { encoding: 'utf8' }).trim().split('\n').at(-1) ?? '{}') as RssFloor;
  });
  return {
    bare: median(runs.map((r) => r.bare)),
    modules: median(runs.map((r) => r.modules)),
    withWorker: median(runs.map((r) => r.withWorker)),
  };
}
