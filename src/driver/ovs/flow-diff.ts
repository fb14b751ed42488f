/**
 * What it takes to make a bridge hold exactly the flows and meters ovsnet wants, from what OVS
 * says it holds. Pure: reads ovs-ofctl's texts, writes ovs-ofctl's input. OVS itself compares
 * the flows (`ovs-ofctl diff-flows BRIDGE FILE` parses both sides into the same form), so a flow
 * written one way and dumped another is never taken for a change; this module keeps the lines
 * that fall in ovsnet's cookie scope and turns them into one bundle of flow mods: `add` for a
 * flow missing or different (add replaces a flow of the same match, cookie and actions
 * included), `delete_strict` for a flow of ovsnet's that is no longer wanted. Flows outside the
 * scope (another controller's) never appear in the result.
 */
import { inScope, type CookieScope } from './cookies.js';

/** One bundle's flow mods and what they do. */
export interface FlowMods {
  /** add-flows input: one `add ...` or `delete_strict ...` per line. */
  readonly lines: readonly string[];
  readonly added: number;
  readonly modified: number;
  readonly deleted: number;
}

export const noMods: FlowMods = { lines: [], added: 0, modified: 0, deleted: 0 };

const LINE = /^(?<key>.*?)(?: cookie=0x(?<cookie>[0-9a-f]+))?(?: actions=(?<actions>.*))?$/;

interface DiffLine {
  readonly key: string;
  readonly cookie: bigint;
  readonly body: string;
}

function parseLine(body: string): DiffLine | undefined {
  const m = LINE.exec(body.trim());
  if (m?.groups === undefined || m.groups.key === undefined || m.groups.key === '') return undefined;
  return { key: m.groups.key, cookie: BigInt(`0x${m.groups.cookie ?? '0'}`), body: body.trim() };
}

/**
 * The flow mods that turn the switch's side of `ovs-ofctl diff-flows SWITCH WANTED` into the
 * wanted side, for flows in `scope` only. A wanted flow outside the scope is a bug of the
 * caller's: refused, so that ovsnet never installs a flow it would not recognise as its own.
 */
export function flowMods(diff: string, scope: CookieScope): FlowMods {
  const removed = new Map<string, DiffLine>();
  const wanted = new Map<string, DiffLine>();
  for (const raw of diff.split('\n')) {
    const sign = raw[0];
    if (sign !== '+' && sign !== '-') continue;
    const line = parseLine(raw.slice(1));
    if (line === undefined) continue;
    if (sign === '+') {
      if (!inScope(line.cookie, scope)) throw new Error(`a wanted flow lies outside ovsnet's cookie scope: ${line.body}`);
      wanted.set(line.key, line);
    } else if (inScope(line.cookie, scope)) removed.set(line.key, line);
  }
  const lines: string[] = [];
  let modified = 0;
  for (const [key, line] of wanted) {
    if (removed.has(key)) modified += 1;
    lines.push(`add ${line.body}`);
  }
  let deleted = 0;
  for (const key of removed.keys()) {
    if (wanted.has(key)) continue;
    deleted += 1;
    // diff-flows leaves table=0 out; a delete without a table would match in every table.
    lines.push(`delete_strict ${key.startsWith('table=') ? key : `table=0 ${key}`}`);
  }
  return { lines, added: wanted.size - modified, modified, deleted };
}

/** A meter as text that compares equal however it was written (add-meter's form or dump-meters'). */
export function meterShape(spec: string): string {
  return spec
    .replace(/bands=type=/g, 'bands= type=')
    .split(/[\s,]+/)
    .filter((t) => t !== '' && !t.startsWith('meter='))
    .join(' ');
}

/** dump-meters' answer: each meter's shape by ID. */
export function parseMeters(dump: string): Map<number, string> {
  const meters = new Map<number, string>();
  for (const block of dump.split(/^(?=meter=)/m)) {
    const id = /^meter=(\d+)/.exec(block)?.[1];
    if (id !== undefined) meters.set(Number(id), meterShape(block));
  }
  return meters;
}

/** What to do with meters: add, modify, delete (IDs), ovsnet's range only (`own`). */
export interface MeterMods {
  readonly add: readonly number[];
  readonly modify: readonly number[];
  readonly remove: readonly number[];
}

export function meterMods(have: ReadonlyMap<number, string>, want: ReadonlyMap<number, string>, own: (id: number) => boolean): MeterMods {
  const add: number[] = [];
  const modify: number[] = [];
  for (const [id, spec] of want) {
    const now = have.get(id);
    if (now === undefined) add.push(id);
    else if (now !== meterShape(spec)) modify.push(id);
  }
  const remove = [...have.keys()].filter((id) => own(id) && !want.has(id));
  return { add, modify, remove };
}

/** dump-groups' answer (OpenFlow 1.5): each group's text after `group_id=ID,`, by ID. */
export function parseGroups(dump: string): Map<number, string> {
  const groups = new Map<number, string>();
  for (const line of dump.split('\n')) {
    const m = /^\s*group_id=(\d+),(.*)$/.exec(line);
    if (m?.[1] !== undefined && m[2] !== undefined) groups.set(Number(m[1]), m[2].trim());
  }
  return groups;
}

/** What to do with groups: add, modify, delete (IDs), ovsnet's range only (`own`). */
export interface GroupMods {
  readonly add: readonly number[];
  readonly modify: readonly number[];
  readonly remove: readonly number[];
}

export const noGroupMods: GroupMods = { add: [], modify: [], remove: [] };

export function groupMods(have: ReadonlyMap<number, string>, want: ReadonlyMap<number, string>, own: (id: number) => boolean): GroupMods {
  const add: number[] = [];
  const modify: number[] = [];
  for (const [id, spec] of want) {
    if (!own(id)) throw new Error(`a wanted group lies outside ovsnet's range: ${id}`);
    const now = have.get(id);
    if (now === undefined) add.push(id);
    else if (now !== spec) modify.push(id);
  }
  const remove = [...have.keys()].filter((id) => own(id) && !want.has(id));
  return { add, modify, remove };
}
