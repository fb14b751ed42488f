/**
 * How the CLI prints: `-o table` (the default: the columns an operator reads first), `-o wide`
 * (every column), `-o json` (the data itself, exact; `--json` says the same). Tables escape
 * control characters (printable).
 */
export const FORMATS = ['table', 'wide', 'json'] as const;
export type Format = (typeof FORMATS)[number];

/** One of `ovsnet doctor`'s checks: what it found, and the fix when it failed. */
export interface Check {
  check: string;
  ok: boolean;
  detail: string;
  fix?: string;
}

/** What a command shows: its data (json), its rows in full (wide) and the shorter table. */
export interface Shown {
  readonly data: unknown;
  readonly table: readonly Record<string, unknown>[];
  /** Every column; the table's rows when absent. */
  readonly wide?: readonly Record<string, unknown>[];
}

// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROLS = /[\0-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** Whether `text` has a character printable() escapes. */
export const hasControl = (text: string): boolean => text.replace(CONTROLS, '') !== text;

/**
 * Text as a terminal may show it: control characters (C0, DEL, C1), and Unicode's bidirectional
 * overrides and line separators, as escapes (\x1b, \u202e). Docker's network names and the
 * daemon's answers reach the operator's screen; an escape sequence in them must not drive it.
 * `keep` lists the controls left as they are (newlines and tabs of a multi-line message).
 */
export function printable(text: string, keep = ''): string {
  return text.replace(CONTROLS, (c) =>
    keep.includes(c)
      ? c
      : c.charCodeAt(0) <= 0xff
        ? `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`
        : `\\u${c.charCodeAt(0).toString(16)}`,
  );
}

function cell(v: unknown): string {
  return printable(cellText(v));
}

function cellText(v: unknown): string {
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
  return [line(cols.map((c) => printable(c.toUpperCase()))), ...rows.map((r) => line(cols.map((c) => cell(r[c]))))].join('\n');
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
