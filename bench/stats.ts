/** Timing helpers for the benchmarks: every figure is measured in the run that prints it. */

export interface Summary {
  readonly n: number;
  readonly perSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Every sample, sorted. */
  readonly latenciesMs: readonly number[];
}

export function percentile(sortedMs: readonly number[], q: number): number {
  if (sortedMs.length === 0) return NaN;
  const i = Math.min(sortedMs.length - 1, Math.max(0, Math.ceil(q * sortedMs.length) - 1));
  return sortedMs[i] ?? NaN;
}

export function median(values: readonly number[]): number {
  return percentile(
    [...values].sort((a, b) => a - b),
    0.5,
  );
}

/** Runs `op` n times in sequence; latency of each and throughput of the whole. */
export async function measure(n: number, op: (i: number) => Promise<unknown>): Promise<Summary> {
  const lat: number[] = [];
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    await op(i);
    lat.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const totalS = Number(process.hrtime.bigint() - start) / 1e9;
  lat.sort((a, b) => a - b);
  return { n, perSecond: n / totalS, p50Ms: percentile(lat, 0.5), p99Ms: percentile(lat, 0.99), latenciesMs: lat };
}

export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(' | ')} |`;
  return [line(headers), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}

export const fmt = (n: number, digits = 2): string => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');
