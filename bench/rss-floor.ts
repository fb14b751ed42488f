/**
 * What a Node process with the daemon's flags holds before ovsnet does anything
 * (rss-floor-child.ts): the floor under the daemon's empty RSS. Median of BENCH_FLOOR_RUNS (3).
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { median } from './stats.js';

const CHILD = fileURLToPath(new URL('./rss-floor-child.js', import.meta.url));

/** RSS, MiB, and of it the file-backed pages (the node binary's, shared). */
export interface Rss {
  readonly rss: number;
  readonly file: number;
}

export interface RssFloor {
  readonly bare: Rss;
  /** A bare Fastify server on a unix socket that has answered 200 calls. */
  readonly fastify: Rss;
  readonly modules: Rss;
  readonly withWorker: Rss;
}

const medianOf = (rs: readonly Rss[]): Rss => ({ rss: median(rs.map((r) => r.rss)), file: median(rs.map((r) => r.file)) });

export function rssFloor(flags: readonly string[]): RssFloor {
  const runs = Array.from({ length: Number(process.env.BENCH_FLOOR_RUNS ?? 3) }, () => {
    const args = [...flags.filter((f) => !f.startsWith('--cpu-prof')), '--expose-gc', CHILD];
    return JSON.parse(execFileSync(process.execPath, args, { encoding: 'utf8' }).trim().split('\n').at(-1) ?? '{}') as RssFloor;
  });
  return {
    bare: medianOf(runs.map((r) => r.bare)),
    fastify: medianOf(runs.map((r) => r.fastify)),
    modules: medianOf(runs.map((r) => r.modules)),
    withWorker: medianOf(runs.map((r) => r.withWorker)),
  };
}
