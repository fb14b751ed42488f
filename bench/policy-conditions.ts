/**
 * The three networks `npm run bench -- policy` compares on one simulated host: a plain ovsnet
 * network (the baseline), a parent with two endpoint groups where `db` lets `web` in on one port
 * (traffic between them routed through the gateway, through conntrack), a network with 100
 * egress rules, and one with a single egress rule (which of the egress cost is per rule). Containers of a condition join its networks in turn: container 0 is the sender
 * of the throughput figures and container 1 the receiver, so in the groups condition a `web`
 * member sends to a `db` member.
 */
import { CREATE_OVSNET } from '../test/harness/host.js';

export interface Condition {
  readonly key: 'plain' | 'groups' | 'egress' | 'egress1';
  readonly label: string;
  /** `docker network create` argument lists, in order (a parent before its groups). */
  readonly creates: readonly (readonly string[])[];
  /** The networks its containers join, in turn; the groups' parent has none of them. */
  readonly networks: readonly string[];
  /** The gateway's address: the host's side, where the "outside" sink listens. */
  readonly gateway: string;
  /** Port of the host-side sink, allowed by the egress rules in the egress condition. */
  readonly hostPort: number;
}

/** Port of the container-to-container sink; the only one `db` allows `web` on. */
export const PEER_PORT = 5201;
export const EGRESS_RULES = 100;

/**
 * `count` egress rules as -o ovsnet.egress takes them, the last one `allowed`: the others are
 * prefixes of 203.0.0.0/16 that nothing in the bench reaches, one port of TCP or UDP each, every
 * tenth without a port (every protocol), so the flows are of each kind the option makes.
 */
export function egressRules(count: number, allowed: string): string {
  if (!Number.isInteger(count) || count < 1 || count > 256) {
    throw new Error(`egress rule count ${count} is not valid: expected 1 to 256 (ovsnet takes at most 256 rules)`);
  }
  const filler = Array.from({ length: count - 1 }, (_, i) =>
    i % 10 === 9 ? `203.0.${i}.0/24` : `203.0.${i}.0/24:${1024 + i}/${i % 2 === 0 ? 'tcp' : 'udp'}`,
  );
  return [...filler, allowed].join(',');
}

const subnet = (octet: number) => ['--subnet', `10.93.${octet}.0/24`];

const group = (name: string, extra: readonly string[] = []) => [
  ...CREATE_OVSNET,
  ...subnet(2),
  ...['--ipam-opt', `ovsnet.group=${name}`, '-o', 'ovsnet.network=pol-app', '-o', `ovsnet.group=${name}`],
  ...extra,
  name,
];

export const CONDITIONS: readonly Condition[] = [
  {
    key: 'plain',
    label: 'plain network',
    creates: [[...CREATE_OVSNET, ...subnet(1), 'pol-plain']],
    networks: ['pol-plain'],
    gateway: '10.93.1.1',
    hostPort: 5301,
  },
  {
    key: 'groups',
    label: 'groups: db allows web',
    creates: [
      [...CREATE_OVSNET, ...subnet(2), '-o', 'ovsnet.network=pol-app', 'pol-app'],
      group('pol-web'),
      group('pol-db', ['-o', `ovsnet.allow=pol-web:${PEER_PORT}/tcp`]),
    ],
    networks: ['pol-web', 'pol-db'],
    gateway: '10.93.2.1',
    hostPort: 5302,
  },
  {
    key: 'egress',
    label: `${EGRESS_RULES} egress rules`,
    creates: [[...CREATE_OVSNET, ...subnet(3), '-o', `ovsnet.egress=${egressRules(EGRESS_RULES, '10.93.3.1/32:5303/tcp')}`, 'pol-egress']],
    networks: ['pol-egress'],
    gateway: '10.93.3.1',
    hostPort: 5303,
  },
  {
    key: 'egress1',
    label: '1 egress rule',
    creates: [[...CREATE_OVSNET, ...subnet(4), '-o', `ovsnet.egress=${egressRules(1, '10.93.4.1/32:5304/tcp')}`, 'pol-egress1']],
    networks: ['pol-egress1'],
    gateway: '10.93.4.1',
    hostPort: 5304,
  },
];

/** The network container `i` of a condition joins. */
export const networkOf = (c: Condition, i: number): string => c.networks[i % c.networks.length] ?? '';

export const containerName = (c: Condition, i: number): string => `${c.key}-${i}`;
