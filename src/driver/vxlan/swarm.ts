/**
 * Docker swarm networks (OVSNET_SCOPE=global). In swarm mode a network has one ID on every node
 * (swarmkit's, 25 base-36 characters, not Docker's 64 hex). The leading manager's allocator calls
 * AllocateNetwork once for the cluster (again after a leader change: it must be idempotent) and
 * hands every worker the options it returned, with which the worker's Docker calls CreateNetwork;
 * FreeNetwork comes when the network is removed. The swarm manager allocates the pool, the
 * gateway, the VIPs and every task's address itself (Docker's IPAM, run for the whole swarm).
 * A swarm network is a logical network (logical.ts) named `swarm-<ID>`: AllocateNetwork makes
 * its record and claims its VNI (or -o ovsnet.tag); each node's CreateNetwork joins it as a
 * member, so tunnels (tunnels.ts) follow the nodes that have tasks on it. The record outlives its
 * members until FreeNetwork, which deletes it, or marks it freed for its last member to delete.
 */
import { OvsnetError } from '../../lib/errors.js';
import { formatPrefix, parseCidr } from '../../lib/cidr.js';
import type { Store } from '../../store/types.js';
import { GENERIC, MAX_VNI } from '../model/options.js';
import { isSwarmNetworkId, type LogicalNetwork } from '../model/records.js';
import { createLogical, deleteIfEmpty, readLogical, replaceLogical, vniHolder } from '../records/logical-records.js';
import { freeId } from './logical.js';

const MTU_OPTION = 'com.docker.network.driver.mtu';
const MAX_RETRIES = 32;

/** The logical network a swarm network is. */
export const swarmLogicalName = (networkId: string): string => `swarm-${networkId}`;

const unsupported = (message: string) => new OvsnetError('SWARM_UNSUPPORTED', message);

export interface AllocateRequest {
  readonly networkId: string;
  /** The network's `-o` options and the options an earlier allocation returned, flat (swarmkit merges them). */
  readonly options: Readonly<Record<string, string>>;
  /** IPv4 subnets the manager's IPAM allocated (swarmkit sends no IPv6 data). */
  readonly subnets: readonly string[];
  readonly host: string;
  readonly now: Date;
}

/**
 * Which options a swarm network may have. Everything not listed under `ovsnet.` is refused by
 * the workers' parse too; `encrypted` (Docker overlay's IPsec) is refused here, where the user's
 * options are seen: ovsnet's VXLAN is not encrypted, and a network that says it is must not start.
 */
function checkOptions(networkId: string, options: Readonly<Record<string, string>>): number | undefined {
  if ('encrypted' in options) {
    throw unsupported(
      "--opt encrypted: ovsnet does not encrypt its VXLAN tunnels; for encrypted traffic between nodes use Docker's overlay driver (-d overlay --opt encrypted), or encrypt in the application (TLS)",
    );
  }
  if (options['com.docker.network.bridge.enable_icc'] === 'false') {
    throw unsupported(
      '-o com.docker.network.bridge.enable_icc=false on a swarm network: its tasks reach each other and the service VIPs across nodes; use separate swarm networks for services that must not talk',
    );
  }
  for (const key of ['ovsnet.egress', 'ovsnet.ingress']) {
    if (key in options) {
      throw unsupported(
        `-o ${key} is not supported on Docker swarm networks (their service VIPs' flows take the tasks' traffic first): use it on a network of one host or a logical network`,
      );
    }
  }
  const encap = options['ovsnet.encap'];
  if (encap !== undefined && encap !== 'vxlan') {
    throw unsupported(`-o ovsnet.encap=${encap}: a swarm network spans the swarm's nodes over VXLAN; drop -o ovsnet.encap`);
  }
  const logical = options['ovsnet.network'];
  if (logical !== undefined && logical !== swarmLogicalName(networkId)) {
    throw unsupported(
      `-o ovsnet.network=${logical}: a swarm network is one network across the swarm by itself; drop -o ovsnet.network (logical networks are for standalone Docker hosts)`,
    );
  }
  const tag = options['ovsnet.tag'];
  if (tag === undefined) return undefined;
  if (!/^\d+$/.test(tag) || Number(tag) < 1 || Number(tag) > MAX_VNI) {
    throw new OvsnetError('NETWORK_OPTION_INVALID', `-o ovsnet.tag=${tag} is not valid: expected a VNI from 1 to ${MAX_VNI}`);
  }
  return Number(tag);
}

/** What the workers' CreateNetwork gets (as `-o` options): the VNI, and the MTU when one was asked for. */
function allocated(record: LogicalNetwork, options: Readonly<Record<string, string>>): Record<string, string> {
  const mtu = options[MTU_OPTION];
  return { 'ovsnet.encap': 'vxlan', 'ovsnet.tag': String(record.vni), ...(mtu === undefined ? {} : { [MTU_OPTION]: mtu }) };
}

/** AllocateNetwork: claims the network's VNI in the shared store; the same answer when asked again. */
export async function allocateSwarmNetwork(store: Store, req: AllocateRequest, scope: 'local' | 'global'): Promise<Record<string, string>> {
  // Only a swarm manager allocates, and only for a driver of global scope: anything else asking
  // changes nothing (Docker never does; a hand-made request must not claim a VNI).
  if (scope !== 'global') {
    throw unsupported(
      `AllocateNetwork is a swarm manager's call, and this ovsnet has OVSNET_SCOPE=local: set OVSNET_SCOPE=global on every node (docker plugin set ovsnet OVSNET_SCOPE=global OVSNET_STORE=etcd://...) to serve swarm networks`,
    );
  }
  if (!isSwarmNetworkId(req.networkId)) {
    throw unsupported(
      `AllocateNetwork for ${req.networkId.slice(0, 64)}: swarm network IDs are 25 lowercase letters and digits, as the swarm manager makes them`,
    );
  }
  const vni = checkOptions(req.networkId, req.options);
  const name = swarmLogicalName(req.networkId);
  const subnets = req.subnets.map((s) => formatPrefix(parseCidr(s)));
  for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
    const read = await readLogical(store, name);
    if (read !== undefined) {
      const current = read.record;
      if (vni !== undefined && vni !== current.vni) {
        throw new OvsnetError(
          'TAG_TAKEN',
          `swarm network ${req.networkId} has VNI ${current.vni} already: omit -o ovsnet.tag or pass ${current.vni}`,
        );
      }
      if (current.freedAt === undefined) return allocated(current, req.options);
      // Allocated again after FreeNetwork while members were leaving: it stands again.
      const { freedAt: _freed, ...again } = current;
      if (await replaceLogical(store, read, again)) return allocated(again, req.options);
      continue;
    }
    const chosen = vni ?? (await freeId(store, 'vxlan', new Set()));
    const record: LogicalNetwork = {
      name,
      encap: 'vxlan',
      vni: chosen,
      subnets,
      internal: false, // swarm's --internal reaches the workers' CreateNetwork, not AllocateNetwork
      members: {},
      createdBy: req.host,
      createdAt: req.now.toISOString(),
      swarm: true,
    };
    if ((await createLogical(store, record)).created) return allocated(record, req.options);
    if (vni !== undefined && (await readLogical(store, name)) === undefined) {
      const holder = (await vniHolder(store, chosen)) ?? 'another network';
      throw new OvsnetError(
        'TAG_TAKEN',
        `VNI ${chosen} is used by logical network ${holder}: pick another from 1 to ${MAX_VNI}, or omit -o ovsnet.tag`,
      );
    }
  }
  throw new OvsnetError('NOT_READY', `swarm network ${req.networkId}: VNIs are changing too fast on other hosts; the manager retries`);
}

/** FreeNetwork: the VNI goes with the record, now or when the last node's network goes. Idempotent. */
export async function freeSwarmNetwork(store: Store, networkId: string, now: Date): Promise<void> {
  for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
    const read = await readLogical(store, swarmLogicalName(networkId));
    if (read === undefined) return;
    const current = read.record;
    // Freed, and then read again: a node's network that left meanwhile (its leave did not see
    // the mark) leaves it to this call to delete.
    if (Object.keys(current.members).length === 0) {
      if ((await deleteIfEmpty(store, read)) === 'deleted') return;
    } else if (current.freedAt !== undefined) return;
    else await replaceLogical(store, read, { ...current, freedAt: now.toISOString() });
  }
  throw new OvsnetError('NOT_READY', `swarm network ${networkId} is changing too fast on other hosts; the manager retries`);
}

/**
 * A worker's CreateNetwork options, checked against the scope: a swarm network needs
 * OVSNET_SCOPE=global (else Docker gives its tasks addresses from each node's own pools: a
 * deployment that looks as if it worked), and a global ovsnet serves swarm networks only.
 * Returns the options with the swarm network's logical name added.
 */
export function swarmScopeOptions(networkId: string, options: Record<string, unknown>, scope: 'local' | 'global'): Record<string, unknown> {
  const swarm = isSwarmNetworkId(networkId);
  if (swarm && scope === 'local') {
    throw unsupported(
      `network ${networkId} is a swarm network (--scope swarm), and this ovsnet has OVSNET_SCOPE=local: the swarm manager would leave its addresses to each node, which hands out the same ones. Set OVSNET_SCOPE=global on every node (docker plugin set ovsnet OVSNET_SCOPE=global OVSNET_STORE=etcd://...), or create the network without --scope swarm`,
    );
  }
  if (!swarm && scope === 'global') {
    throw unsupported(
      `this ovsnet has OVSNET_SCOPE=global and serves Docker swarm networks only: create the network on a swarm manager (docker network create -d ovsnet:latest --scope swarm --attachable ...), or use a plugin with OVSNET_SCOPE=local for networks of one host`,
    );
  }
  if (!swarm) return options;
  const raw = options[GENERIC];
  const generic = raw !== null && typeof raw === 'object' ? (raw as Record<string, unknown>) : {};
  if (generic['ovsnet.tag'] === undefined) {
    throw unsupported(
      `swarm network ${networkId} came without the VNI its allocation gives (ovsnet.tag): was it allocated by an ovsnet with OVSNET_SCOPE=global?`,
    );
  }
  return { ...options, [GENERIC]: { ...generic, 'ovsnet.network': swarmLogicalName(networkId) } };
}
