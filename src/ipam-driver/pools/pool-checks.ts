/**
 * RequestPool's checks of what Docker and the user asked for: the address space, `--ipam-opt`
 * keys, and an explicit --subnet/--ip-range against subnets.ts's rules, the pools of every
 * address space and the host's own segments. Pure: the caller supplies pools and host nets.
 */
import { contains, formatPrefix, overlaps, parseCidr, type Prefix } from '../../lib/cidr.js';
import type { DefaultPool } from '../../config/config.js';
import { OvsnetError } from '../../lib/errors.js';
import {
  ALLOW_CONNECTED,
  allowConnected,
  checkHostOverlap,
  checkSubnet,
  parseSubnet,
  type HostNet,
  type MinPrefix,
} from '../../lib/subnets.js';
import { nextPool } from './carve.js';
import { ADDRESS_SPACES } from './pool-id.js';
import type { PoolRecord } from '../state/records.js';
import { STICKY } from '../state/holder-keys.js';

/** `--ipam-opt` keys of ovsnet; other keys (Docker's own) pass through untouched. */
/** Endpoint groups' IPAM option (group-pool.ts). */
export const GROUP_OPTION = 'ovsnet.group';
export const GROUP_OPTION_HELP =
  "the endpoint group this network is (the same NAME as its -o ovsnet.group): it shares the pool of its parent on this host, so give the parent's exact --subnet (and --ip-range)";
const NAME = /^[A-Za-z0-9_.-]{1,64}$/;

export function checkGroupOption(options: Readonly<Record<string, string>>): void {
  const name = options[GROUP_OPTION];
  if (name !== undefined && !NAME.test(name)) {
    throw new OvsnetError(
      'IPAM_OPTION_INVALID',
      `--ipam-opt ${GROUP_OPTION}=${name} is not valid: expected 1-64 letters, digits, '-', '_' or '.' (${GROUP_OPTION_HELP})`,
    );
  }
}

export const IPAM_OPTIONS: Readonly<Record<string, string>> = {
  'ovsnet.block-size':
    "the prefix length of the blocks hosts claim in a logical network's pool, 16 to 32 (default 26: 64 addresses; IPv6 blocks hold as many addresses)",
  [ALLOW_CONNECTED]:
    'true lets --subnet overlap a segment the host is connected to (a network sharing an uplink on purpose), default false',
  [GROUP_OPTION]: GROUP_OPTION_HELP,
  [STICKY]:
    'true gives a holder (a container recreated with the same name, a CNI attachment) the address it held last while that address is free, default false',
};

export interface PoolRules {
  readonly minPrefix: MinPrefix;
  readonly hostNets: () => readonly HostNet[];
  readonly defaultPools: readonly DefaultPool[];
}

/** How a refusal says to share a connected segment on purpose (the driver needs its own -o too). */
const SHARE = `--ipam-opt ${ALLOW_CONNECTED}=true (and -o ${ALLOW_CONNECTED}=true for the ovsnet driver)`;

export function checkSpace(space: string): string {
  if (space === '') return ADDRESS_SPACES.local;
  if (space !== ADDRESS_SPACES.local && space !== ADDRESS_SPACES.global) {
    throw new OvsnetError(
      'IPAM_ADDRESS_SPACE_INVALID',
      `address space ${JSON.stringify(space)} is not one of ovsnet's: ${ADDRESS_SPACES.local}, ${ADDRESS_SPACES.global}`,
    );
  }
  return space;
}

export function checkOptions(options: Readonly<Record<string, string>>): void {
  for (const key of Object.keys(options)) {
    if (key.startsWith('ovsnet.') && !(key in IPAM_OPTIONS)) {
      const valid = Object.entries(IPAM_OPTIONS)
        .map(([k, v]) => `${k} (${v})`)
        .join(', ');
      throw new OvsnetError('IPAM_OPTION_INVALID', `--ipam-opt ${key} is not an ovsnet IPAM option: valid ones: ${valid}`);
    }
  }
  const block = options['ovsnet.block-size'];
  if (block !== undefined && !(/^\/?\d+$/.test(block) && Number(block.replace('/', '')) >= 16 && Number(block.replace('/', '')) <= 32)) {
    throw new OvsnetError(
      'IPAM_OPTION_INVALID',
      `--ipam-opt ovsnet.block-size=${block} is not valid: expected ${IPAM_OPTIONS['ovsnet.block-size'] ?? ''}`,
    );
  }
  const allow = options[ALLOW_CONNECTED];
  if (allowConnected(allow) === undefined) {
    throw new OvsnetError('IPAM_OPTION_INVALID', `--ipam-opt ${ALLOW_CONNECTED}=${allow ?? ''} is not valid: expected true or false`);
  }
  checkGroupOption(options);
  const sticky = options[STICKY];
  if (sticky !== undefined && sticky !== 'true' && sticky !== 'false') {
    throw new OvsnetError('IPAM_OPTION_INVALID', `--ipam-opt ${STICKY}=${sticky} is not valid: expected true or false`);
  }
}

/** Options as stored: ovsnet.block-size without its optional slash. */
export function normalOptions(options: Readonly<Record<string, string>>): Record<string, string> {
  const block = options['ovsnet.block-size'];
  return block === undefined ? { ...options } : { ...options, 'ovsnet.block-size': block.replace('/', '') };
}

/** Parses Pool or SubPool; a malformed one is IPAM_POOL_INVALID (subnets.ts's rules come after). */
export function parsePool(text: string, field: string): Prefix {
  try {
    return parseSubnet(text, field);
  } catch (err) {
    throw new OvsnetError('IPAM_POOL_INVALID', err instanceof Error ? err.message : String(err));
  }
}

/**
 * An explicit --subnet (and --ip-range): the family asked for, a size IPAM takes, subnets.ts's
 * rules, no overlap with a pool of any address space (LocalDefault and GlobalDefault networks
 * meet on the same hosts), and none with the host's own segments unless allowed.
 */
/** An exact repeat of a pool may be meant for an endpoint group (group-pool.ts). */
const groupHint = ` (or, for an endpoint group of that network, add --ipam-opt ${GROUP_OPTION}=NAME with -o ovsnet.group=NAME -o ovsnet.network=PARENT)`;

export function checkPool(
  req: { pool: string; subPool: string; v6: boolean; options: Readonly<Record<string, string>> },
  existing: readonly PoolRecord[],
  rules: PoolRules,
): { pool: Prefix; sub?: Prefix } {
  const pool = parsePool(req.pool, 'Pool');
  if ((pool.family === 6) !== req.v6) {
    throw new OvsnetError('IPAM_POOL_INVALID', `pool ${req.pool} is IPv${pool.family} but the request is for IPv${req.v6 ? 6 : 4}`);
  }
  if (pool.family === 6 && pool.bits > 64) {
    throw new OvsnetError(
      'IPAM_POOL_INVALID',
      `IPv6 pool ${req.pool} is too small: ovsnet takes IPv6 pools of /64 or larger (a shorter prefix)`,
    );
  }
  checkSubnet(pool, 'Pool', rules.minPrefix);
  let sub: Prefix | undefined;
  if (req.subPool !== '') {
    sub = parsePool(req.subPool, 'SubPool (--ip-range)');
    if (!contains(pool, sub)) {
      throw new OvsnetError(
        'IPAM_POOL_INVALID',
        `--ip-range ${req.subPool} is not inside --subnet ${formatPrefix(pool)}: give a range within the subnet`,
      );
    }
  }
  for (const other of existing) {
    if (overlaps(pool, parseCidr(other.pool))) {
      throw new OvsnetError(
        'IPAM_POOL_OVERLAP',
        `pool ${formatPrefix(pool)} overlaps pool ${other.pool} (${other.poolId}) already in use in address space ${other.addressSpace}: choose a subnet that overlaps no other network's${suggestion(pool, existing, rules)}${other.pool === formatPrefix(pool) ? groupHint : ''}`,
      );
    }
  }
  checkHost(pool, req.options, existing, rules);
  return sub === undefined ? { pool } : { pool, sub };
}

/** The host-overlap rule alone (a host joining a logical network's pool). */
export function checkHost(
  pool: Prefix,
  options: Readonly<Record<string, string>>,
  existing: readonly PoolRecord[],
  rules: PoolRules,
): void {
  if (allowConnected(options[ALLOW_CONNECTED]) === true) return;
  const free = nextPool(rules.defaultPools, pool.family, 0n, [
    ...existing.map((r) => parseCidr(r.pool)),
    ...rules.hostNets().map((h) => h.prefix),
  ]);
  checkHostOverlap(pool, 'Pool', rules.hostNets(), SHARE, free === undefined ? undefined : formatPrefix(free.prefix));
}

function suggestion(pool: Prefix, existing: readonly PoolRecord[], rules: PoolRules): string {
  const taken = [...existing.map((r) => parseCidr(r.pool)), ...rules.hostNets().map((h) => h.prefix)];
  const free = nextPool(rules.defaultPools, pool.family, 0n, taken);
  return free === undefined ? '' : `, e.g. ${formatPrefix(free.prefix)} (free now)`;
}

/**
 * ovsnet's IPAM numbers no swarm network (address space GlobalDefault, asked with OVSNET_SCOPE=
 * global): the manager asks once for the swarm and every node asks again for the same subnet and
 * addresses, in calls a remote IPAM cannot tell apart, so it would either refuse the nodes or
 * hand out addresses twice. Docker's IPAM, run by the swarm manager, is exact.
 */
export function refuseSwarmPool(req: { readonly addressSpace: string }, swarmScope: boolean): void {
  if (swarmScope && req.addressSpace === ADDRESS_SPACES.global) {
    throw new OvsnetError(
      'SWARM_UNSUPPORTED',
      "ovsnet's IPAM does not number swarm networks (address space GlobalDefault): create the network without --ipam-driver, so that the swarm manager numbers it for the whole swarm (ovsnet's driver takes its addresses as given)",
    );
  }
}
