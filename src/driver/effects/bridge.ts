/**
 * ovsnet's bridge: made in fail_mode=secure when ovsnet has OpenFlow access, so that it forwards
 * only what ovsnet's flows say, and given at once the flow that makes it a VLAN-aware learning
 * switch for plain networks (NORMAL, at the lowest priority, under ovsnet's own cookie). Without
 * OpenFlow access (tests, tools) it is made standalone: OVS's own learning switch.
 */
import { FEATURE, cookieOf, hex, only } from '../ovs/cookies.js';
import type { FailMode } from '../ovs/ovsdb.js';
import type { DriverDeps } from './deps.js';

export const BASE_COOKIE = cookieOf(FEATURE.base, 0);

/** The flows every ovsnet bridge holds, whatever its networks. */
export const BASE_FLOWS: readonly string[] = [`cookie=${hex(BASE_COOKIE)},priority=0,actions=NORMAL`];

export type BridgeDeps = Pick<DriverDeps, 'ovs' | 'bridge' | 'datapath' | 'openflow'>;

export const failModeOf = (deps: Pick<DriverDeps, 'openflow'>): FailMode => (deps.openflow === undefined ? 'standalone' : 'secure');

/**
 * Makes the bridge if it is missing (with its base flows when secure); an existing bridge is
 * left to reconcile (openflow-state.ts), which also turns an earlier ovsnet's standalone bridge
 * secure. Returns whether it made it. Idempotent.
 */
export async function ensureOwnBridge(deps: BridgeDeps): Promise<boolean> {
  if (await deps.ovs.bridgeExists(deps.bridge)) return false;
  await deps.ovs.ensureBridge(deps.bridge, deps.datapath(), failModeOf(deps));
  await deps.openflow?.sync(deps.bridge, only(BASE_COOKIE), { flows: BASE_FLOWS });
  return true;
}
