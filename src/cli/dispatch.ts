/**
 * The CLI's dispatcher: a table of commands (each with its options, arguments and help, possibly
 * subcommands), parsed with Node's util.parseArgs. Adding a command or a flag is adding an entry.
 *
 * Exit status: 0 done; 1 a check failed (status, doctor) or the command could not finish (a
 * store it cannot reach); 2 a usage error (unknown command or option, bad value) or invalid
 * settings. The daemon (`serve`) exits 0 when stopped by a signal, 1 on a fatal error, 2 on
 * invalid settings.
 */
import { parseArgs } from 'node:util';
import { FORMATS, type Format } from './output.js';

export const EXIT = { ok: 0, problem: 1, usage: 2 } as const;

export interface OptionSpec {
  readonly type: 'string' | 'boolean';
  readonly short?: string;
  readonly help: string;
  /** The value's placeholder in the help (string options). */
  readonly value?: string;
}

/** What a command's run() is given. */
export interface Invocation {
  readonly format: Format;
  /** Option values by long name (the command's own and the common ones). */
  readonly values: Readonly<Record<string, string | boolean | undefined>>;
  readonly args: readonly string[];
}

export interface CommandSpec<C> {
  readonly summary: string;
  /** Positional arguments as the usage line shows them, e.g. "[POOL]"; none when absent. */
  readonly args?: string;
  readonly maxArgs?: number;
  readonly options?: Readonly<Record<string, OptionSpec>>;
  /** Takes -o/--json (prints data). */
  readonly output?: boolean;
  /** Help text after the options. */
  readonly details?: string;
  readonly subcommands?: Readonly<Record<string, CommandSpec<C>>>;
  /** The exit status, or undefined to keep running (serve). Absent: needs a subcommand. */
  readonly run?: (inv: Invocation, context: C) => Promise<number | undefined>;
}

export type CommandTable<C> = Readonly<Record<string, CommandSpec<C>>>;

const HELP: OptionSpec = { type: 'boolean', short: 'h', help: 'show this help' };
const OUTPUT_OPTIONS: Readonly<Record<string, OptionSpec>> = {
  output: { type: 'string', short: 'o', value: 'FORMAT', help: 'table (the default), wide (every column) or json' },
  json: { type: 'boolean', help: 'the same as -o json' },
};

/** Every option of a command: its own, -o/--json if it prints data, and -h. */
function optionsOf<C>(spec: CommandSpec<C>): Record<string, OptionSpec> {
  return { ...spec.options, ...(spec.output ? OUTPUT_OPTIONS : {}), help: HELP };
}

export function usageOf<C>(table: CommandTable<C>): string {
  const width = Math.max(...Object.keys(table).map((c) => c.length)) + 2;
  return `usage: ovsnet <command> [options]

commands:
${Object.entries(table)
  .map(([c, s]) => `  ${c.padEnd(width)}${s.summary}`)
  .join('\n')}

Every command takes -h/--help. Settings are OVSNET_* environment variables (see docs/operators-guide.md);
the operator's commands read the running daemon's (or /etc/default/ovsnet's).
Exit status: 0 done, 1 a check failed or the command could not finish, 2 a usage error or
invalid settings.`;
}

export function helpOf<C>(name: string, spec: CommandSpec<C>): string {
  const opts = optionsOf(spec);
  const left = (k: string, o: OptionSpec) =>
    `${o.short === undefined ? '    ' : `-${o.short}, `}--${k}${o.value === undefined ? '' : ` ${o.value}`}`;
  const width = Math.max(...Object.entries(opts).map(([k, o]) => left(k, o).length)) + 2;
  const subs = Object.entries(spec.subcommands ?? {});
  return [
    `usage: ovsnet ${name}${subs.length > 0 ? ' [SUBCOMMAND]' : ''} [options]${spec.args === undefined ? '' : ` ${spec.args}`}`,
    '',
    spec.summary,
    ...(subs.length === 0 ? [] : ['', 'subcommands:', ...subs.map(([s, d]) => `  ${s.padEnd(12)}${d.summary}`)]),
    '',
    'options:',
    ...Object.entries(opts).map(([k, o]) => `  ${left(k, o).padEnd(width)}${o.help}`),
    ...(spec.details === undefined ? [] : ['', spec.details]),
  ].join('\n');
}

/** A mistake in the command line: said with the usage, exit status 2. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly command?: string,
  ) {
    super(message);
  }
}

/**
 * Finds the command (and subcommand) and parses its options. Returns the help text instead when
 * -h/--help is given.
 */
export function parse<C>(
  table: CommandTable<C>,
  argv: readonly string[],
): { name: string; spec: CommandSpec<C>; inv: Invocation } | { help: string } {
  const [first, ...rest] = argv;
  if (first === undefined) throw new UsageError('no command given');
  if (first === 'help') {
    const [topic, sub] = rest;
    const spec = topic === undefined ? undefined : table[topic];
    if (topic === undefined) return { help: usageOf(table) };
    if (spec === undefined) throw new UsageError(`unknown command ${JSON.stringify(topic)}`);
    const subSpec = sub === undefined ? undefined : spec.subcommands?.[sub];
    return { help: subSpec === undefined ? helpOf(topic, spec) : helpOf(`${topic} ${sub ?? ''}`, subSpec) };
  }
  let name = first;
  let spec = table[first];
  let args = rest;
  if (spec === undefined) throw new UsageError(`unknown command ${JSON.stringify(first)}`);
  const sub = rest[0] === undefined ? undefined : spec.subcommands?.[rest[0]];
  if (sub !== undefined) {
    name = `${first} ${rest[0] ?? ''}`;
    spec = sub;
    args = rest.slice(1);
  }
  const options = optionsOf(spec);
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: [...args],
      options: Object.fromEntries(
        Object.entries(options).map(([k, o]) => [k, o.short === undefined ? { type: o.type } : { type: o.type, short: o.short }]),
      ),
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message.replace(/\. To specify a positional.*$/s, '') : String(err), name);
  }
  const values = parsed.values as Record<string, string | boolean | undefined>;
  if (values.help === true) return { help: helpOf(name, spec) };
  if (spec.run === undefined) {
    const subs = Object.keys(spec.subcommands ?? {}).join(', ');
    throw new UsageError(`${name} needs a subcommand: ${subs}`, name);
  }
  const max = spec.maxArgs ?? 0;
  if (parsed.positionals.length > max) {
    const extra = parsed.positionals.slice(max).join(' ');
    throw new UsageError(
      `${name} takes ${max === 0 ? 'no arguments' : `at most ${max} argument(s) (${spec.args ?? ''})`}, not ${extra}`,
      name,
    );
  }
  const output = values.output;
  if (output !== undefined && !(FORMATS as readonly unknown[]).includes(output))
    throw new UsageError(`-o ${String(output)} is not an output format: expected ${FORMATS.join(', ')}`, name);
  const format: Format = values.json === true ? 'json' : ((output as Format | undefined) ?? 'table');
  return { name, spec, inv: { format, values, args: parsed.positionals } };
}
