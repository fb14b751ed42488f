/**
 * `ovsnet doctor`'s OpenFlow check: does the bridge hold what ovsnet's records say it should
 * (driver/upkeep/openflow-state.ts), in fail_mode=secure? Computed here as the daemon computes
 * it, compared by ovs-ofctl diff-flows: a read, nothing changed.
 */
import { hostNameOf, type Config } from '../../config/config.js';
import { messageOf } from '../../lib/errors.js';
import { createLogger } from '../../lib/log.js';
import type { Store } from '../../store/types.js';
import type { Ovsdb } from '../../driver/ovs/ovsdb.js';
import { OpenFlow } from '../../driver/ovs/openflow.js';
import { FlowSync, changeCount } from '../../driver/ovs/flow-sync.js';
import { QosFlows } from '../../driver/ovs/qos-flows.js';
import { GroupFlows } from '../../driver/ovs/groups/group-flows.js';
import { DriverRecords } from '../../driver/records/driver-records.js';
import { GroupWiring } from '../../driver/groups/group-wiring.js';
import { OpenFlowState } from '../../driver/upkeep/openflow-state.js';
import { IccWiring } from '../../driver/network/icc.js';
import type { Check } from '../output.js';
import type { SwarmVipsInfo } from '../../plugin-api/admin-routes.js';
import { hostResolvers } from '../../host/resolvers.js';

const FIX =
  'ovsnet puts its flows right within 10 s, and at once after an ovs-vswitchd restart: if this stays, is the daemon running (ovsnet status)? Restarting it reconciles the bridge';

/**
 * `vips`: the swarm VIPs the daemon programs (its admin endpoint's swarmVips, by network ID), so
 * that their flows and groups count as ovsnet's; absent: none.
 */
export async function openflowCheck(config: Config, store: Store, ovs: Ovsdb, vips?: SwarmVipsInfo['networks']): Promise<Check> {
  const check = 'openflow';
  try {
    const mode = await ovs.failMode(config.bridge);
    if (mode === undefined) return { check, ok: true, detail: `bridge ${config.bridge} not created yet` };
    const of = new OpenFlow();
    const log = createLogger('silent');
    const table = new Map(Object.entries(vips ?? {}));
    const deps = {
      ...{ ovs, store, log, bridge: config.bridge, openflow: new FlowSync(of), qos: new QosFlows(of), groups: new GroupFlows(of) },
      vips: () => table,
      resolvers: () => hostResolvers(),
    };
    const records = new DriverRecords(store, hostNameOf(config));
    const changes = await new OpenFlowState(deps, records, new GroupWiring(deps, records), new IccWiring(deps, records)).diff();
    const n = changes === undefined ? 0 : changeCount(changes);
    const secure = mode === 'secure';
    if (n === 0 && secure)
      return { check, ok: true, detail: `${config.bridge} is fail_mode=secure and holds exactly ovsnet's flows and meters` };
    if (n === 0) {
      return {
        check,
        ok: true,
        detail: `${config.bridge} holds exactly ovsnet's flows and meters; it is fail_mode=${mode || 'standalone'} (an earlier ovsnet's), made secure the next time ovs-vswitchd restarts`,
      };
    }
    const f = changes?.flows;
    const m = changes?.meters;
    const g = changes?.groups;
    const parts = [
      ...(secure ? [] : [`${config.bridge} is fail_mode=${mode || 'standalone'} (made secure at the next ovs-vswitchd restart)`]),
      ...(f === undefined || f.lines.length === 0
        ? []
        : [`flows: ${f.added} missing, ${f.modified} different, ${f.deleted} not ovsnet's any more`]),
      ...(m === undefined || m.add.length + m.modify.length + m.remove.length === 0
        ? []
        : [`meters: ${m.add.length} missing, ${m.modify.length} different, ${m.remove.length} stale`]),
      ...(g === undefined || g.add.length + g.modify.length + g.remove.length === 0
        ? []
        : [`VIP groups: ${g.add.length} missing, ${g.modify.length} different, ${g.remove.length} stale`]),
    ];
    return { check, ok: false, detail: `Open vSwitch and ovsnet disagree: ${parts.join('; ')}`, fix: FIX };
  } catch (err) {
    return {
      check,
      ok: false,
      detail: `cannot compare the bridge's flows with ovsnet's: ${messageOf(err)}`,
      fix: 'is ovs-vswitchd running, and ovs-ofctl installed?',
    };
  }
}
