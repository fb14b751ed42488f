/**
 * `ovsnet networks`, pure: network and endpoint records to rows (networkRows), rows and Docker's
 * names to what each output form prints (networksShown). Endpoint groups are
 * listed right under their parent, each with its own tag and endpoint count; a group whose
 * parent's record is gone (the parent removed first) still shows, last, flagged as orphaned.
 */
import type { AllowRule } from '../driver/model/group-options.js';
import type { EndpointRecord, NetworkRecord } from '../driver/model/records.js';
import { nameOf, type DockerNames } from './docker-api.js';
import type { Shown } from './output.js';

/** Network IDs as the CLI shows them (and Docker's `network ls`): their first 12 characters. */
const short = (networkId: string) => networkId.slice(0, 12);

/** One of a parent's groups, as its row says it. */
export interface GroupSummary {
  /** The group network's ID, 12 characters as `network`. */
  networkId: string;
  /** Its group name (-o ovsnet.group). */
  name: string;
  tag: number;
  endpoints: number;
}

export interface NetworkRow {
  network: string;
  host: string;
  /** Logical network and VNI (vxlan) or uplink VLAN, '' for a one-host VLAN network. */
  logical: string;
  tag: number;
  bridge: string;
  subnets: string[];
  gateway: string;
  internal: boolean;
  mtu: number;
  /** This network's own endpoints (a parent's do not include its groups'). */
  endpoints: number;
  /**
   * An endpoint group's: its name, its parent (12 characters, as the parent's `network`), its
   * allows as given; orphaned when no record of the parent is left.
   */
  group?: { name: string; parent: string; allow: readonly AllowRule[]; orphaned: boolean };
  /**
   * A parent's: the name its groups give it (-o ovsnet.network), the groups whose containers may
   * open connections into its own (-o ovsnet.allow), and its groups by name.
   */
  groupsName?: string;
  allow?: readonly AllowRule[];
  groups?: GroupSummary[];
}

function baseRow(n: NetworkRecord, eps: readonly EndpointRecord[]): NetworkRow {
  const data = [...n.ipv4, ...n.ipv6];
  return {
    network: short(n.networkId),
    host: n.host ?? '',
    logical:
      n.logical === undefined ? '' : `${n.logical} (${n.vni === undefined ? `VLAN ${n.tag} on ${n.uplink ?? '?'}` : `VNI ${n.vni}`})`,
    tag: n.tag,
    bridge: n.bridge,
    subnets: data.map((d) => d.pool),
    gateway: n.internal ? '(internal)' : (data.find((d) => d.gateway !== undefined)?.gateway ?? ''),
    internal: n.internal,
    mtu: n.mtu,
    // A swarm network has one ID on every node: each node's own endpoints.
    endpoints: eps.filter((e) => e.networkId === n.networkId && (e.host === undefined || e.host === n.host)).length,
  };
}

const groupRow = (g: NetworkRecord, eps: readonly EndpointRecord[], orphaned: boolean): NetworkRow => ({
  ...baseRow(g, eps),
  ...(g.group === undefined ? {} : { group: { name: g.group.name, parent: short(g.group.parent), allow: g.group.allow, orphaned } }),
});

/**
 * Every network's row, in the store's order, each parent followed by its groups (by group
 * name); orphaned groups last. A group's parent is the network whose ID its record names.
 */
export function networkRows(nets: readonly NetworkRecord[], eps: readonly EndpointRecord[]): NetworkRow[] {
  const parents = new Map(nets.filter((n) => n.group === undefined).map((n) => [n.networkId, n]));
  const groupsOf = new Map<string, NetworkRecord[]>();
  const orphans: NetworkRecord[] = [];
  for (const g of nets) {
    if (g.group === undefined) continue;
    if (parents.has(g.group.parent)) groupsOf.set(g.group.parent, [...(groupsOf.get(g.group.parent) ?? []), g]);
    else orphans.push(g);
  }
  const rows: NetworkRow[] = [];
  for (const n of parents.values()) {
    const groups = (groupsOf.get(n.networkId) ?? [])
      .sort((a, b) => (a.group?.name ?? '').localeCompare(b.group?.name ?? ''))
      .map((g) => groupRow(g, eps, false));
    const named = n.groupsName !== undefined || groups.length > 0;
    rows.push({
      ...baseRow(n, eps),
      ...(n.groupsName === undefined ? {} : { groupsName: n.groupsName }),
      ...(named
        ? {
            allow: n.allow ?? [],
            groups: groups.map((g) => ({ networkId: g.network, name: g.group?.name ?? '', tag: g.tag, endpoints: g.endpoints })),
          }
        : {}),
    });
    rows.push(...groups);
  }
  rows.push(...orphans.map((g) => groupRow(g, eps, true)));
  return rows;
}

/** In a group's row under its parent, the parent's subnets and gateway: "same as above". */
export const DITTO = '"';
/** Before a group's network ID in the table: it hangs from the row above. */
export const UNDER = '└ ';

const allowText = (allow: readonly AllowRule[]) =>
  allow.length === 0 ? '-' : allow.map((a) => (a.port === undefined ? a.group : `${a.group}:${a.port.number}/${a.port.proto}`)).join(',');

/** The GROUP cell: a parent's groups name, a group's name, an orphan's with the parent it lost. */
const groupCell = (r: NetworkRow) =>
  r.group === undefined
    ? (r.groupsName ?? '')
    : r.group.orphaned
      ? `${r.group.name} (orphaned: parent ${r.group.parent} gone)`
      : r.group.name;

/** The ALLOW cell (wide): a group's or a parent's allows, nothing for other networks. */
const allowCell = (r: NetworkRow) =>
  r.group !== undefined ? allowText(r.group.allow) : r.groups !== undefined ? allowText(r.allow ?? []) : '';

/**
 * What `ovsnet networks` prints: the rows with Docker's names (json: every field; wide: every
 * column; table: the usual ones). Host and logical network columns only where several hosts
 * share the store; group columns only where there are groups. A group's row under its parent
 * shows DITTO for subnets and gateway equal to the parent's.
 */
export function networksShown(rows: readonly NetworkRow[], names: DockerNames | undefined): Shown {
  const named = rows.map((r) => ({ ...r, name: nameOf(names?.networks, r.network) }));
  const cluster = rows.some((r) => r.logical !== '' || (r.host !== '' && r.host !== rows[0]?.host));
  const grouped = rows.some((r) => r.group !== undefined || r.groups !== undefined);
  const table: Record<string, unknown>[] = [];
  const wide: Record<string, unknown>[] = [];
  let parent: NetworkRow | undefined;
  for (const r of named) {
    if (r.group === undefined) parent = r;
    const under = r.group !== undefined && !r.group.orphaned && parent?.network === r.group.parent;
    const ditto = (mine: string | string[], its: string | string[] | undefined) => (under && String(mine) === String(its) ? DITTO : mine);
    const row = (all: boolean) => ({
      network: under ? `${UNDER}${r.network}` : r.network,
      name: r.name,
      ...(cluster || all ? { host: r.host, logical: r.logical } : {}),
      ...(grouped ? { group: groupCell(r) } : {}),
      ...(grouped && all ? { allow: allowCell(r) } : {}),
      tag: r.tag,
      ...(all ? { bridge: r.bridge } : {}),
      subnets: ditto(r.subnets, parent?.subnets),
      gateway: ditto(r.gateway, parent?.gateway),
      ...(all ? { internal: r.internal } : {}),
      mtu: r.mtu,
      endpoints: r.endpoints,
    });
    table.push(row(false));
    wide.push(row(true));
  }
  return { data: named, table, wide };
}
