/**
 * Endpoint groups' options, pure: `-o ovsnet.group=NAME` with
 * `-o ovsnet.network=PARENT` makes a network a group of PARENT, and `-o ovsnet.allow=
 * GROUP[:PORT/PROTO][,...]` names the groups whose containers may open connections into this
 * one (GROUP may be the parent's own name: its endpoints outside every group). Names are
 * resolved to tags against the parent's groups when the flows are built (resolveAllows), since
 * a group may name one created after it. ovs/groups/group-flows.ts enforces the result; options.ts
 * takes these with the network's other options.
 */
import { OvsnetError } from '../../lib/errors.js';

export const GROUP = 'ovsnet.group';
export const ALLOW = 'ovsnet.allow';

export const GROUP_OPTIONS: Readonly<Record<string, string>> = {
  [GROUP]:
    "makes the network an endpoint group of the network named by ovsnet.network: the parent's subnet and pool, a tag of its own; 1-64 letters, digits, '-', '_' or '.'",
  [ALLOW]:
    "the groups (or the parent, by its ovsnet.network name) whose containers may open connections into this network's, comma-separated, each optionally limited to one port as GROUP:PORT/tcp or GROUP:PORT/udp (default: none)",
};

const NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const ALLOW_ITEM = /^([A-Za-z0-9_.-]{1,64})(?::(\d{1,5})\/(tcp|udp))?$/;

/** New connections from group `from` to group `to` pass (all IPv4, or one port of tcp/udp). */
export interface GroupAllow {
  readonly to: number;
  readonly from: number;
  readonly port?: { readonly number: number; readonly proto: 'tcp' | 'udp' };
}

/** An allow as the user wrote it: a group's name, and optionally one port of one protocol. */
export interface AllowRule {
  readonly group: string;
  readonly port?: { readonly number: number; readonly proto: 'tcp' | 'udp' };
}

export interface GroupOptions {
  /** This network's group name; undefined for a network that is no group. */
  readonly group: string | undefined;
  /** The parent's name (ovsnet.network), for a group. */
  readonly parent: string | undefined;
  readonly allow: readonly AllowRule[];
}

const invalid = (message: string) => new OvsnetError('NETWORK_OPTION_INVALID', message);

/**
 * Reads ovsnet.group, ovsnet.allow and the ovsnet.network they refer to through `get`
 * (undefined: not given). Throws NETWORK_OPTION_INVALID naming the bad value and the valid form.
 */
export function parseGroupOptions(get: (key: string) => string | undefined): GroupOptions {
  const group = get(GROUP);
  const parent = get('ovsnet.network');
  const allowText = get(ALLOW);
  if (group !== undefined && !NAME.test(group)) throw invalid(`-o ${GROUP}=${group} is not valid: expected ${GROUP_OPTIONS[GROUP] ?? ''}`);
  if (group !== undefined && parent === undefined) {
    throw invalid(
      `-o ${GROUP}=${group} needs -o ovsnet.network=PARENT beside it: the network whose subnet and pool the group shares (created first, with -o ovsnet.network=PARENT)`,
    );
  }
  if (group !== undefined && group === parent) {
    throw invalid(`-o ${GROUP}=${group} is the parent's own name (ovsnet.network): give the group a name of its own`);
  }
  const allow: AllowRule[] = [];
  if (allowText !== undefined) {
    if (parent === undefined) {
      throw invalid(
        `-o ${ALLOW}=${allowText} applies to a network with groups: add -o ovsnet.network=PARENT (and -o ${GROUP}=NAME for a group)`,
      );
    }
    for (const item of allowText.split(',').map((s) => s.trim())) {
      const m = ALLOW_ITEM.exec(item);
      const port = m?.[2] === undefined ? undefined : Number(m[2]);
      if (m === null || (port !== undefined && (port < 1 || port > 65535))) {
        throw invalid(
          `-o ${ALLOW}=${allowText} is not valid at "${item}": expected GROUP or GROUP:PORT/tcp or GROUP:PORT/udp (PORT 1-65535), comma-separated`,
        );
      }
      const name = m[1] ?? '';
      if (name === (group ?? parent))
        throw invalid(`-o ${ALLOW}=${allowText} names this network itself (${name}): its own containers always reach each other`);
      allow.push(port === undefined ? { group: name } : { group: name, port: { number: port, proto: m[3] === 'udp' ? 'udp' : 'tcp' } });
    }
  }
  return { group, parent, allow };
}

/**
 * The allows of group `to` (its tag) as flow rules: each name resolved through `tags` (group
 * name, or the parent's name, to tag). A name no group has (yet) allows nothing: it is
 * returned in `unknown` for the caller to log, since a group may be created after the one naming it.
 */
export function resolveAllows(
  to: number,
  rules: readonly AllowRule[],
  tags: ReadonlyMap<string, number>,
): { allows: GroupAllow[]; unknown: string[] } {
  const allows: GroupAllow[] = [];
  const unknown: string[] = [];
  for (const r of rules) {
    const from = tags.get(r.group);
    if (from === undefined) unknown.push(r.group);
    else allows.push(r.port === undefined ? { to, from } : { to, from, port: r.port });
  }
  return { allows, unknown };
}
