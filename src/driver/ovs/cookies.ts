/**
 * Which OpenFlow flows, meters and groups are ovsnet's. Every flow ovsnet installs carries a
 * cookie whose top 16 bits name the feature and whose low bits name the network, segment or port
 * it is for; reconcile reads, replaces and deletes only flows inside ovsnet's cookie space and
 * never another controller's. Meters (and, later, select groups) have no cookie in OpenFlow:
 * ovsnet's are those whose ID falls in its range (qos-flows.ts's METER_BASE).
 *
 *   0x0f5c  the bridge's own flows (fail_mode=secure: forwarding for plain networks)
 *   0x0f5d  an endpoint's QoS, low bits its OpenFlow port
 *   0x0f5e  a logical network's gateway guard, low bits its VNI
 *   0x0f5f  a VLAN network's gateway guard on the uplink, low bits its tag
 *   0x0f60  endpoint groups, low bits the parent's tag (bit 32 was a generation until 0.x: read as the same parent)
 *   0x0f61  swarm service VIPs, low bits the network's tag (their select groups: vip/flows.ts's GROUP_BASE range)
 *   0x0f62  enable_icc=false (icc-flows.ts), low bits the network's tag: its drops count what the policy stopped
 *   0x0f63  a network's egress and ingress rules, low bits its tag (network/egress-flows.ts)
 *
 * The whole space is 0x0f40-0x0f7f in the top 16 bits: one value/mask that dump-flows takes.
 */

/** A set of cookies, as OpenFlow matches them: those whose bits under `mask` equal `value`'s. */
export interface CookieScope {
  readonly value: bigint;
  readonly mask: bigint;
}

const FEATURE_SHIFT = 48n;

export const FEATURE = {
  base: 0x0f5cn,
  qos: 0x0f5dn,
  guardVni: 0x0f5en,
  guardVlan: 0x0f5fn,
  groups: 0x0f60n,
  vip: 0x0f61n,
  icc: 0x0f62n,
  egress: 0x0f63n,
} as const;

/** Every cookie ovsnet uses, now and in the features to come. */
export const OWN: CookieScope = { value: 0x0f40n << FEATURE_SHIFT, mask: 0xffc0n << FEATURE_SHIFT };

/** The cookie of a feature's flows for one network, segment or port (`low` below 2^32). */
export const cookieOf = (feature: bigint, low: number | bigint): bigint => (feature << FEATURE_SHIFT) | BigInt(low);

/** As ovs-ofctl takes it. */
export const hex = (cookie: bigint): string => `0x${cookie.toString(16)}`;

/** The scope of exactly one cookie. */
export const only = (cookie: bigint): CookieScope => ({ value: cookie, mask: (1n << 64n) - 1n });

export const inScope = (cookie: bigint, scope: CookieScope): boolean => (cookie & scope.mask) === (scope.value & scope.mask);

/** `cookie=VALUE/MASK` for dump-flows and del-flows. */
export const scopeArg = (scope: CookieScope): string => `cookie=${hex(scope.value)}/${hex(scope.mask)}`;
