/**
 * Egress and ingress rules' options, pure: `-o ovsnet.egress=CIDR[:PORT/tcp|udp][,...]` names
 * the destinations outside the network its containers may open connections to, `-o
 * ovsnet.ingress=...` the sources outside it whose connections may reach them (published ports
 * always do); `none` allows nothing. Each value is parsed whole and strictly (no spaces, no other
 * character, canonical CIDRs without host bits, PORT 1-65535, at most MAX_RULES rules), since
 * what it yields becomes OpenFlow matches (network/egress-flows.ts) and iptables arguments
 * (ports/nat-rules.ts). options.ts takes these with the network's other options; docs/egress.md.
 */
import { CidrError, parseCidr, formatPrefix, type Family } from '../../lib/cidr.js';
import { OvsnetError } from '../../lib/errors.js';

export const EGRESS = 'ovsnet.egress';
export const INGRESS = 'ovsnet.ingress';
export type PolicyKey = typeof EGRESS | typeof INGRESS;

/** Rules per option, and characters per value (256 IPv6 rules with ports fit). */
export const MAX_RULES = 256;
export const MAX_LENGTH = 16_384;

/** The valid form, as refusals name it. */
export const POLICY_FORM = 'CIDR[:PORT/tcp|udp][,...]';

export const POLICY_OPTIONS: Readonly<Record<PolicyKey, string>> = {
  [EGRESS]: `the only destinations outside the network its containers may open connections to, ${POLICY_FORM} (at most ${MAX_RULES}, PORT 1-65535), or none; DNS to the host's resolvers always passes, replies always do (default: every destination)`,
  [INGRESS]: `the only sources outside the network (the host, an infra port, machines routed to the subnet) whose connections may reach its containers, ${POLICY_FORM} (at most ${MAX_RULES}, PORT 1-65535), or none; published ports and replies always pass (default: the host and an infra port, nothing routed)`,
};

/** One rule: a prefix (canonical, no host bits), all of it or one port of one protocol. */
export interface NetRule {
  readonly cidr: string;
  readonly port?: { readonly number: number; readonly proto: 'tcp' | 'udp' };
}

const OCTET = '(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)';
const IPV4 = new RegExp(`^${OCTET}(?:\\.${OCTET}){3}$`);
const IPV6 = /^[0-9A-Fa-f:.]{2,45}$/;
const LENGTH_AND_PORT = /^(0|[1-9]\d{0,2})(?::(.*))?$/;
const PORT = /^([1-9]\d{0,4})\/(tcp|udp)$/;

export const familyOfRule = (r: NetRule): Family => (r.cidr.includes(':') ? 6 : 4);

/** A value as a refusal quotes it: printable and short as given, else escaped and cut. */
function shown(v: string): string {
  if (/^[\x21-\x7e]{1,64}$/.test(v)) return v;
  const cut = JSON.stringify(v.slice(0, 64));
  return v.length > 64 ? `${cut}... (${v.length} characters)` : cut;
}

function refusal(key: PolicyKey, value: string, why: string): OvsnetError {
  return new OvsnetError(
    'NETWORK_OPTION_INVALID',
    `-o ${key}=${shown(value)} is not valid: ${why}; expected -o ${key}=${POLICY_FORM} (at most ${MAX_RULES} rules, PORT 1-65535, e.g. 203.0.113.0/24:443/tcp,10.20.0.0/16), or -o ${key}=none`,
  );
}

/** One rule, or why it is not one. */
function parseRule(item: string): NetRule | string {
  const slash = item.indexOf('/');
  if (item === '') return 'an empty rule (two commas, or one at an end)';
  if (slash < 0) return `${shown(item)} has no prefix length (a single address is ADDRESS/32, or /128 for IPv6)`;
  const address = item.slice(0, slash);
  const m = LENGTH_AND_PORT.exec(item.slice(slash + 1));
  if (!IPV4.test(address) && !(address.includes(':') && IPV6.test(address))) return `${shown(item)} does not start with an IP address`;
  if (m === null) return `${shown(item)}: a prefix length, then optionally :PORT/tcp or :PORT/udp`;
  let p;
  try {
    p = parseCidr(`${address}/${m[1] ?? ''}`);
  } catch (err) {
    return err instanceof CidrError ? err.message : `${shown(item)} is not a CIDR`;
  }
  const cidr = formatPrefix(p);
  if (p.address !== p.base)
    return `${shown(item)} has host bits set: the network is ${cidr} (one address: ${address}/${p.family === 4 ? 32 : 128})`;
  if (m[2] === undefined) return { cidr };
  const port = PORT.exec(m[2]);
  const number = Number(port?.[1] ?? 0);
  if (port === null || number > 65535) return `${shown(item)}: the port is PORT/tcp or PORT/udp, PORT 1-65535`;
  return { cidr, port: { number, proto: port[2] === 'udp' ? 'udp' : 'tcp' } };
}

/**
 * The rules of `-o KEY=raw` (undefined: not given; [] for none). `raw` as Docker sent it, not
 * trimmed. Throws NETWORK_OPTION_INVALID naming the option, the bad part and the valid form.
 */
export function parsePolicy(key: PolicyKey, raw: unknown): readonly NetRule[] | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== 'string') throw refusal(key, JSON.stringify(raw) ?? '', 'it must be a string');
  if (raw.length > MAX_LENGTH) throw refusal(key, raw, `it is ${raw.length} characters long (at most ${MAX_LENGTH})`);
  if (raw === '') throw refusal(key, raw, 'it is empty (to allow nothing, give none)');
  if (raw === 'none') return [];
  const items = raw.split(',');
  if (items.length > MAX_RULES) throw refusal(key, raw, `it has ${items.length} rules (at most ${MAX_RULES})`);
  const rules = new Map<string, NetRule>();
  for (const [i, item] of items.entries()) {
    const rule = parseRule(item);
    if (typeof rule === 'string') throw refusal(key, raw, `rule ${i + 1}: ${rule}`);
    rules.set(`${rule.cidr}:${rule.port?.number ?? ''}/${rule.port?.proto ?? ''}`, rule);
  }
  return [...rules.values()];
}

/**
 * The rules of both options against the network's families: a rule of a family the network has
 * no subnet of could never match, so it is refused naming why (IPv6 rules need a dual-stack
 * network). `internal`: an --internal network has no way out nor in to rule.
 */
export function checkPolicy(
  policy: { readonly egress: readonly NetRule[] | undefined; readonly ingress: readonly NetRule[] | undefined },
  network: { readonly v4: boolean; readonly v6: boolean; readonly internal: boolean },
): void {
  for (const [key, rules] of [
    [EGRESS, policy.egress],
    [INGRESS, policy.ingress],
  ] as const) {
    if (rules === undefined) continue;
    if (network.internal) {
      throw new OvsnetError(
        'NETWORK_OPTION_INVALID',
        `-o ${key} rules what crosses the network's gateway, and an --internal network has none: drop -o ${key} or --internal`,
      );
    }
    for (const r of rules) {
      const family = familyOfRule(r);
      if (family === 6 && !network.v6) {
        throw new OvsnetError(
          'NETWORK_OPTION_INVALID',
          `-o ${key}: ${r.cidr} is IPv6 and the network has no IPv6 subnet, so the rule could never match: create the network with --ipv6 and an IPv6 --subnet, or drop the IPv6 rules`,
        );
      }
      if (family === 4 && !network.v4) {
        throw new OvsnetError(
          'NETWORK_OPTION_INVALID',
          `-o ${key}: ${r.cidr} is IPv4 and the network has no IPv4 subnet, so the rule could never match: drop the IPv4 rules`,
        );
      }
    }
  }
}
