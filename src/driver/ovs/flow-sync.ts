/**
 * Makes a bridge hold exactly the OpenFlow state ovsnet wants within a cookie scope, atomically
 * and with the fewest changes: meters first (a flow naming a missing meter is refused; over one
 * OpenFlow connection when the bridge's management socket is known, of-requests.ts), then
 * every flow change in one OpenFlow bundle (`ovs-ofctl --bundle add-flows`: all or none, no
 * moment with half the rules), then the meters no flow uses any more. What is already right is
 * left alone: a sync with nothing to change makes no OpenFlow modification at all, only reads:
 * one diff-flows process and, when the management socket is known, the meters and (with no group
 * wanted) the groups' IDs over OpenFlow (of-requests.ts); else dump-meters and dump-groups.
 *
 * diff-flows reads the wanted flows only from a named file: it is given /dev/stdin, and its stdin
 * is a file with no name (exec.ts), so nothing of ovsnet's is ever left in the temporary
 * directory, not even by a daemon killed during the call.
 */
import { OvsnetError } from '../../lib/errors.js';
import {
  flowMods,
  groupMods,
  meterMods,
  noGroupMods,
  noMods,
  parseGroups,
  parseMeters,
  type FlowMods,
  type GroupMods,
  type MeterMods,
} from './flow-diff.js';
import { type CookieScope } from './cookies.js';
import { OpenFlow, type OfctlCall } from './openflow.js';
import { meterPort } from './qos-flows.js';
import { readGroupIds, readMeters, sendMeterMods, type MeterMod } from './of-requests.js';

const OF13: OfctlCall = { of13: true };
/** Bundles are OpenFlow 1.4's. */
const OF14 = ['-O', 'OpenFlow14'];
/** Groups in OpenFlow 1.5's form (bucket IDs), as they are compared and bundled with flows. */
const OF15 = ['-O', 'OpenFlow15'];
/** How many meter commands run at once after ovs-vswitchd lost them all. */
const METER_CONCURRENCY = 8;

/**
 * The state wanted: flows as add-flow takes them, meters (ID -> add-meter's spec), groups (ID ->
 * the group as dump-groups prints it in OpenFlow 1.5 after `group_id=ID,`) with the test of
 * which group IDs are ovsnet's (groups carry no cookie).
 */
export interface Wanted {
  readonly flows: readonly string[];
  readonly meters?: ReadonlyMap<number, string>;
  readonly groups?: { readonly specs: ReadonlyMap<number, string>; readonly own: (id: number) => boolean };
}

/** What a sync changed (or, for diff(), would change). */
export interface Changes {
  readonly flows: FlowMods;
  readonly meters: MeterMods;
  readonly groups: GroupMods;
}

const noMeters: MeterMods = { add: [], modify: [], remove: [] };

export const changeCount = (c: Changes): number =>
  c.flows.lines.length +
  c.meters.add.length +
  c.meters.modify.length +
  c.meters.remove.length +
  c.groups.add.length +
  c.groups.modify.length +
  c.groups.remove.length;

export class FlowSync {
  /**
   * `mgmt`: the bridge's management socket, when known (a unix OVSDB socket's directory): meters
   * then go, and are read, over OpenFlow in one connection (of-requests.ts), else one ovs-ofctl run each.
   */
  constructor(
    private readonly of: OpenFlow = new OpenFlow(),
    private readonly mgmt: (bridge: string) => string | undefined = () => undefined,
    private readonly timeoutMs = 10_000,
  ) {}

  /**
   * What sync() would change: the flows in `scope` and (when `meters` is given, or `ownMeters`)
   * ovsnet's meters. A read.
   */
  async diff(bridge: string, scope: CookieScope, wanted: Wanted, ownMeters = wanted.meters !== undefined): Promise<Changes> {
    const text = wanted.flows.length === 0 ? '' : `${wanted.flows.join('\n')}\n`;
    // diff-flows exits 2 when the two sides differ, 1 when it failed.
    const args = ['diff-flows', bridge, '/dev/stdin'];
    const r = await this.of.answer(args, { ...OF13, input: { file: text } });
    if (r.code !== 0 && r.code !== 2) throw this.of.error(args, r, OF13);
    const flows = r.stdout.trim() === '' ? noMods : flowMods(r.stdout, scope);
    const mgmt = this.mgmt(bridge);
    const groups = wanted.groups === undefined ? noGroupMods : await this.groupMods(bridge, mgmt, wanted.groups);
    if (!ownMeters) return { flows, meters: noMeters, groups };
    const have =
      mgmt === undefined ? parseMeters(await this.of.ofctl(['dump-meters', bridge], OF13)) : await readMeters(mgmt, this.timeoutMs);
    const meters = meterMods(have, wanted.meters ?? new Map(), (id) => meterPort(id) !== undefined);
    return { flows, meters, groups };
  }

  /**
   * The group changes: compared in dump-groups' text, or, when ovsnet wants no group and the
   * management socket is known, from the groups' IDs over OpenFlow alone (any of ovsnet's held
   * goes; the common case, no swarm VIP, costs no process).
   */
  private async groupMods(bridge: string, mgmt: string | undefined, want: NonNullable<Wanted['groups']>): Promise<GroupMods> {
    if (want.specs.size === 0 && mgmt !== undefined) {
      const held = await readGroupIds(mgmt, this.timeoutMs);
      return groupMods(new Map(held.map((id) => [id, ''])), want.specs, want.own);
    }
    return groupMods(parseGroups(await this.of.ofctl([...OF15, 'dump-groups', bridge])), want.specs, want.own);
  }

  /** Makes the bridge hold `wanted` within `scope` (see the header); returns what it changed. */
  async sync(bridge: string, scope: CookieScope, wanted: Wanted, ownMeters = wanted.meters !== undefined): Promise<Changes> {
    const changes = await this.diff(bridge, scope, wanted, ownMeters);
    const specs = wanted.meters ?? new Map<number, string>();
    const socket = this.mgmt(bridge);
    if (socket !== undefined) {
      const mods = (command: MeterMod['command'], ids: readonly number[]): MeterMod[] =>
        ids.map((id) => {
          const spec = specs.get(id);
          return { command, id, ...(spec === undefined ? {} : { spec }) };
        });
      await sendMeterMods(socket, [...mods('add', changes.meters.add), ...mods('modify', changes.meters.modify)], this.timeoutMs);
      await this.bundle(bridge, changes.flows, changes.groups, wanted.groups?.specs);
      await sendMeterMods(socket, mods('delete', changes.meters.remove), this.timeoutMs);
      return changes;
    }
    await this.meters(bridge, 'add-meter', changes.meters.add, specs);
    await this.meters(bridge, 'mod-meter', changes.meters.modify, specs);
    await this.bundle(bridge, changes.flows, changes.groups, wanted.groups?.specs);
    await this.meters(bridge, 'del-meter', changes.meters.remove, specs);
    return changes;
  }

  /**
   * The flow mods, and the group mods when there are any, in one bundle: every one applied, or
   * none (the bridge unchanged, OVS_FAILED). Groups are added and modified before the flows that
   * use them, and deleted after the flows that used them.
   */
  async bundle(
    bridge: string,
    mods: FlowMods,
    groups: GroupMods = noGroupMods,
    specs: ReadonlyMap<number, string> = new Map(),
  ): Promise<void> {
    const groupCount = groups.add.length + groups.modify.length + groups.remove.length;
    if (mods.lines.length === 0 && groupCount === 0) return;
    let args = [...OF14, '--bundle', 'add-flows', bridge, '-'];
    let r;
    if (groupCount === 0) {
      r = await this.of.answer(args, { input: `${mods.lines.join('\n')}\n` });
    } else {
      const group = (verb: string, id: number) => `group ${verb} group_id=${id}${verb === 'delete' ? '' : `,${specs.get(id) ?? ''}`}`;
      const lines = [
        ...groups.add.map((id) => group('add', id)),
        ...groups.modify.map((id) => group('modify', id)),
        ...mods.lines.map((l) => `flow ${l}`),
        ...groups.remove.map((id) => group('delete', id)),
      ];
      args = [...OF15, 'bundle', bridge, '/dev/stdin'];
      r = await this.of.answer(args, { input: { file: `${lines.join('\n')}\n` } });
    }
    if (r.code === 0) return;
    const base = this.of.error(args, r);
    throw new OvsnetError(
      'OVS_FAILED',
      `${base.message}; the bundle was refused whole, the bridge's flows are as they were (does the bridge allow OpenFlow14 and 15: ovs-vsctl get bridge ${bridge} protocols?)`,
    );
  }

  private async meters(bridge: string, command: string, ids: readonly number[], specs: ReadonlyMap<number, string>): Promise<void> {
    const queue = [...ids];
    const worker = async (): Promise<void> => {
      for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
        const spec = command === 'del-meter' ? `meter=${id}` : specs.get(id);
        if (spec !== undefined) await this.of.ofctl([command, bridge, spec], OF13);
      }
    };
    await Promise.all(Array.from({ length: Math.min(METER_CONCURRENCY, queue.length) }, worker));
  }
}
