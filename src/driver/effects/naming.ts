/**
 * Interface names for a network's gateway and infra port and an endpoint's veth, unique among
 * live links: Docker IDs sharing their first 12 characters would otherwise share a name, and the
 * second Join would replace the first container's veth (the second infra network, take the
 * first's port). The first candidate is the ID's first 12
 * characters (as ovsnet always named them); when another live link holds it, the next
 * deterministic candidate (model/records.ts `names`). The chosen names go into the record, and every
 * later step uses the record's names.
 */
import { OvsnetError } from '../../lib/errors.js';
import { nameTaken } from '../links/link-error.js';
import type { DriverDeps } from './deps.js';
import { networkOf, roleOf } from '../ovs/external-ids.js';
import { NAME_CANDIDATES, names, type EndpointRecord, type NetworkRecord } from '../model/records.js';

/**
 * Plugs `recorded` (plug: Join's side effects, whose first step creates the veth pair) under its
 * record's names, almost always free: tried as they are, with no lookup first. Only when another
 * live link holds one (the kernel's EEXIST; the endpoint's own leftover is replaced by the
 * create itself) are the names chosen by vethNames, kept in the record (keep), and plugged: the
 * first attempt left nothing, since its create was what failed. Returns the endpoint as plugged.
 */
export async function plugUnderFreeNames(
  links: DriverDeps['links'],
  recorded: EndpointRecord,
  plug: (ep: EndpointRecord) => Promise<void>,
  keep: (ep: EndpointRecord) => Promise<void>,
): Promise<EndpointRecord> {
  try {
    await plug(recorded);
    return recorded;
  } catch (err) {
    if (!nameTaken(err)) throw err;
  }
  const ep = { ...recorded, ...(await vethNames(links, recorded)) };
  if (ep.hostVeth !== recorded.hostVeth) await keep(ep);
  await plug(ep);
  return ep;
}

/**
 * The veth names Join uses for `ep`: its record's when no other link holds them (a leftover of
 * this endpoint's, carrying its alias, is its own), else the first free candidate. Runs under
 * the driver's port mutex, so no other Join picks names meanwhile.
 */
export async function vethNames(links: DriverDeps['links'], ep: EndpointRecord): Promise<{ hostVeth: string; containerVeth: string }> {
  const mine = names.alias(ep.endpointId);
  const tried: string[] = [];
  // The record's names first (almost always free), then the derived ones: each candidate is
  // made only when the one before it is taken (candidates past the first cost a SHA-256 each).
  for (let k = -1; k < NAME_CANDIDATES; k++) {
    const c =
      k < 0
        ? { hostVeth: ep.hostVeth, containerVeth: ep.containerVeth }
        : { hostVeth: names.hostVeth(ep.endpointId, k), containerVeth: names.containerVeth(ep.endpointId, k) };
    tried.push(c.hostVeth);
    // Both looked up at once: Join waits for one worker round trip, not two.
    const [host, container] = await Promise.all([links.alias(c.hostVeth), links.alias(c.containerVeth)]);
    if (host === mine || (host === undefined && container === undefined)) return c;
  }
  throw new OvsnetError(
    'LINK_FAILED',
    `every interface name ovsnet derives from endpoint ${ep.endpointId.slice(0, 12)} (${tried.join(', ')}) is held by another link: remove the links that are not ovsnet's`,
  );
}

/**
 * The name of a new network's host port of `role` (its gateway, its infra port): one no other
 * network of this host has in its record and no other link holds (a leftover port of this same
 * network and role, found by its OVS external_ids, is its own: creation repairs it).
 */
async function portName(
  deps: Pick<DriverDeps, 'links' | 'ovs'>,
  role: 'gateway' | 'infra',
  networkId: string,
  others: readonly NetworkRecord[],
): Promise<string> {
  const recorded = (n: NetworkRecord) => (role === 'gateway' ? n.gatewayPort : n.infra?.port);
  const inRecords = new Set(
    others.flatMap((n) => {
      const port = recorded(n);
      return port === undefined || n.networkId === networkId ? [] : [port];
    }),
  );
  let own: Set<string> | undefined;
  for (let k = 0; k < NAME_CANDIDATES; k++) {
    const name = names[role](networkId, k);
    if (inRecords.has(name)) continue;
    if ((await deps.links.alias(name)) === undefined) return name;
    own ??= new Set((await deps.ovs.ownPorts()).filter((p) => roleOf(p) === role && networkOf(p) === networkId).map((p) => p.name));
    if (own.has(name)) return name;
  }
  throw new OvsnetError(
    'LINK_FAILED',
    `every ${role} port name ovsnet derives from network ${networkId.slice(0, 12)} is held by another link: remove the links that are not ovsnet's`,
  );
}

/** The gateway port name for a new network (portName). */
export const gatewayName = (deps: Pick<DriverDeps, 'links' | 'ovs'>, networkId: string, others: readonly NetworkRecord[]) =>
  portName(deps, 'gateway', networkId, others);

/** The infra port name for a new network (portName): IDs sharing 12 characters get two ports. */
export const infraName = (deps: Pick<DriverDeps, 'links' | 'ovs'>, networkId: string, others: readonly NetworkRecord[]) =>
  portName(deps, 'infra', networkId, others);
