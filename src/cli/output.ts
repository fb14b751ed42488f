/**
 * How the CLI prints: `-o table` (the default: the columns an operator reads first), `-o wide`
 * (every column), `-o json` (the data itself; `--json` says the same).
 */
export const FORMATS = ['table', 'wide', 'json'] as const;
export type Format = (typeof FORMATS)[number];

/** What a command shows: its data (json), its rows in full (wide) and the shorter table. */
export interface Shown {
  readonly data: unknown;
  readonly table: readonly Record<string, unknown>[];
  /** Every column; the table's rows when absent. */
  readonly wide?: readonly Record<string, unknown>[];
}

function cell(v: unknown): string {
  return Array.isArray(v)
    ? v.join(',')
    : typeof v === 'object' && v !== null
      ? Object.entries(v)
          .map(([k, n]) => `${k}:${String(n)}`)
          .join(',')
      : typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean'
        ? String(v)
        : '';
}

export function table(rows: readonly Record<string, unknown>[]): string {
  if (rows.length === 0) return '(none)';
  const cols = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(cols.map((c) => c.toUpperCase())), ...rows.map((r) => line(cols.map((c) => cell(r[c]))))].join('\n');
}

export function render(shown: Shown, format: Format): string {
  switch (format) {
    case 'json':
      return JSON.stringify(shown.data, null, 2);
    case 'wide':
      return table(shown.wide ?? shown.table);
    case 'table':
      return table(shown.table);
  }
}
