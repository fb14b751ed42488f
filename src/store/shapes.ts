/**
 * What each family of JSON records under /ovsnet/v1/ must hold, chosen by its key (keys.ts is
 * the layout, this is what the values of the layout look like). Every record read goes through
 * decode.ts, which applies the family's check: a record a peer or an operator wrote by hand
 * with a wrong field type, or a CIDR or address that does not parse, is refused where it is read
 * rather than deep inside whoever uses it. The record types themselves stay with their owners
 * (driver/model/records, ipam-driver/state/records, cluster/hosts); these checks are the least
 * those owners rely on, and `ovsnet doctor` uses the same table to list bad keys.
 *
 * Fields added by a newer ovsnet are allowed (only the named ones are checked); optional fields
 * are checked when present.
 */
import { parseAddress, parseCidr } from '../lib/cidr.js';
import { keys } from './keys.js';

/** Says what is wrong with a parsed value, or undefined when it is acceptable. */
export type ShapeCheck = (value: Record<string, unknown>) => string | undefined;

/** A field's test and how a valid one looks, for the message. */
interface Field {
  readonly ok: (v: unknown) => boolean;
  readonly what: string;
}

const parses = (f: () => unknown): boolean => {
  try {
    f();
    return true;
  } catch {
    return false;
  }
};

const str: Field = { ok: (v) => typeof v === 'string', what: 'a string' };
const bool: Field = { ok: (v) => typeof v === 'boolean', what: 'true or false' };
const count: Field = { ok: (v) => Number.isSafeInteger(v) && (v as number) >= 0, what: 'a whole number >= 0' };
const cidr: Field = {
  ok: (v) => typeof v === 'string' && parses(() => parseCidr(v)),
  what: 'a CIDR such as 10.1.0.0/24 or fd00::/64',
};
const address: Field = { ok: (v) => typeof v === 'string' && parses(() => parseAddress(v)), what: 'an IP address such as 10.1.0.5' };
const addressOrNone: Field = { ok: (v) => v === '' || address.ok(v), what: 'an IP address or ""' };

const optional = (f: Field): Field => ({ ok: (v) => v === undefined || f.ok(v), what: `absent or ${f.what}` });
const listOf = (f: Field): Field => ({ ok: (v) => Array.isArray(v) && v.every((x) => f.ok(x)), what: `a list of ${f.what}s` });
const objectWith = (fields: Readonly<Record<string, Field>>, what: string): Field => ({
  ok: (v) => typeof v === 'object' && v !== null && !Array.isArray(v) && check(fields)(v as Record<string, unknown>) === undefined,
  what,
});
const mapOf = (f: Field): Field => ({
  ok: (v) => typeof v === 'object' && v !== null && !Array.isArray(v) && Object.values(v).every((x) => f.ok(x)),
  what: `an object of ${f.what}s`,
});

/** At most this much of a bad field is quoted back. */
const QUOTE_LIMIT = 40;

function check(fields: Readonly<Record<string, Field>>): ShapeCheck {
  // Listed once: every record read runs the check (an entries array per read was 2% of a start's allocation).
  const listed = Object.entries(fields);
  return (value) => {
    for (const [name, f] of listed) {
      if (f.ok(value[name])) continue;
      const shown = JSON.stringify(value[name]) ?? 'absent';
      return `its ${name} is ${shown.length > QUOTE_LIMIT ? `${shown.slice(0, QUOTE_LIMIT)}...` : shown}, not ${f.what}`;
    }
    return undefined;
  };
}

/** An endpoint's or network's QoS (src/driver/model/qos-options.ts): what reaches ovs-ofctl. */
const qos = objectWith(
  { rateKbps: optional(count), burstKbit: optional(count), dscp: optional(count) },
  'QoS: rateKbps, burstKbit, dscp as whole numbers',
);
const ipData = objectWith({ pool: cidr, gateway: optional(cidr) }, 'an object with a pool CIDR and an optional gateway CIDR');
/**
 * An egress or ingress rule (src/driver/model/policy-options.ts): what reaches ovs-ofctl and
 * iptables, so the CIDR must be exactly one, nothing around it.
 */
const netRule = objectWith(
  {
    cidr: { ok: (v) => typeof v === 'string' && /^[0-9A-Fa-f.:]+\/\d{1,3}$/.test(v) && cidr.ok(v), what: 'a CIDR' },
    port: optional(
      objectWith(
        {
          number: { ok: (v) => Number.isSafeInteger(v) && (v as number) >= 1 && (v as number) <= 65535, what: 'a port 1-65535' },
          proto: { ok: (v) => v === 'tcp' || v === 'udp', what: 'tcp or udp' },
        },
        'a port and its protocol',
      ),
    ),
  },
  'a rule: a CIDR and an optional port',
);
const portBinding = objectWith(
  { containerPort: count, hostPort: count, hostPortEnd: count, hostIp: str, proto: str },
  'a port binding (proto, containerPort, hostIp, hostPort, hostPortEnd)',
);

/** Each family: the key prefix under which it lives, and its check. */
export const FAMILIES: readonly { readonly family: string; readonly prefix: string; readonly check: ShapeCheck }[] = [
  {
    family: 'hosts',
    prefix: keys.hosts,
    check: check({ name: str, vtepIp: addressOrNone, machineId: str, tunnelMtu: optional(count), startedAt: str }),
  },
  {
    family: 'logical networks',
    prefix: keys.logicalNetworks,
    check: check({
      name: str,
      vni: count,
      subnets: listOf(cidr),
      internal: bool,
      icc: optional(bool),
      // Layout 1 kept the members here; layout 2 keeps them as keys of their own (below).
      members: optional(mapOf(objectWith({ networkId: str }, 'a member with a networkId'))),
      closing: optional(str),
    }),
  },
  {
    family: 'logical network members',
    prefix: keys.allLogicalMembers,
    check: check({ networkId: str, since: str }),
  },
  {
    family: 'networks',
    prefix: keys.networks,
    check: check({
      networkId: str,
      host: optional(str),
      logical: optional(str),
      vni: optional(count),
      uplink: optional(str),
      infra: optional(objectWith({ port: str, addresses: listOf(cidr) }, 'an infra port and its addresses')),
      bridge: str,
      tag: count,
      mtu: count,
      internal: bool,
      ipv4: listOf(ipData),
      ipv6: listOf(ipData),
      gatewayPort: optional(str),
      masquerade: optional(bool),
      hostBinding: optional(str),
      icc: optional(bool),
      qos: optional(qos),
      egress: optional(listOf(netRule)),
      ingress: optional(listOf(netRule)),
    }),
  },
  {
    family: 'endpoints',
    prefix: keys.allEndpoints,
    check: check({
      networkId: str,
      endpointId: str,
      address: optional(cidr),
      addressV6: optional(cidr),
      mac: str,
      hostVeth: str,
      containerVeth: str,
      ifname: optional(str),
      portmap: listOf(portBinding),
      qos: optional(qos),
    }),
  },
  {
    family: 'pools',
    prefix: keys.pools,
    check: check({
      poolId: str,
      addressSpace: str,
      pool: cidr,
      subPool: optional(cidr),
      v6: bool,
      options: mapOf(str),
      host: str,
      logical: optional(str),
      users: optional(listOf(str)),
      shares: optional(count),
      hostShares: optional(mapOf(count)),
    }),
  },
  { family: 'reservations', prefix: keys.allAddresses, check: check({ address, poolId: str, host: str, endpoint: optional(str) }) },
  { family: 'blocks', prefix: keys.allBlocks, check: check({ host: str, count }) },
  {
    family: 'tombstones',
    prefix: keys.allTombstones,
    check: check({
      poolId: str,
      address,
      endpoint: str,
      host: str,
      at: { ok: (v) => typeof v === 'string' && Number.isFinite(Date.parse(v)), what: 'a time such as 2026-12-02T04:00:00.000Z' },
    }),
  },
  { family: 'departed hosts', prefix: keys.departed, check: check({ host: str, since: str }) },
];

/** The family of a key ("other" outside the JSON families: counts, tags, cursors). */
export function familyOf(key: string): string {
  return FAMILIES.find((f) => key.startsWith(f.prefix))?.family ?? 'other';
}

/** The check of the key's family; undefined outside the JSON families. */
export function shapeOf(key: string): ShapeCheck | undefined {
  return FAMILIES.find((f) => key.startsWith(f.prefix))?.check;
}
