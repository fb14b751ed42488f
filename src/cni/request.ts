/**
 * A CNI command as the daemon checks it (pure): the runtime's environment and network
 * configuration (CNI spec: CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, stdin's cniVersion, name,
 * type and ovsnet's `network`), and the ADD result in the version the configuration asks for.
 */
import { OvsnetError } from '../lib/errors.js';
import type { Attachment } from './attachments.js';
import { containerIdProblem, ifnameProblem, quoted } from './names.js';
import { CNI_VERSIONS, type CniCommand, type RpcRequest } from './protocol.js';

export interface CniConfig {
  readonly cniVersion: string;
  /** The CNI network's name (stdin `name`). */
  readonly name: string;
  /** The ovsnet network: a Docker network name or ID, or a logical network name. */
  readonly network: string;
  /** GC (CNI 1.1): the attachments the runtime still has; every other of this network goes (GC requires it). */
  readonly validAttachments?: readonly { containerId: string; ifname: string }[];
}

export interface CniCall {
  readonly command: CniCommand;
  readonly containerId: string;
  readonly netns: string;
  readonly ifname: string;
  readonly config: CniConfig;
}

const COMMANDS: readonly CniCommand[] = ['ADD', 'DEL', 'CHECK', 'GC', 'STATUS'];

function configError(what: string): OvsnetError {
  return new OvsnetError('CNI_CONFIG_INVALID', `the CNI network configuration ${what}`);
}

/** The CNI configuration on stdin, checked. */
export function parseConfig(text: string): CniConfig {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw configError(`is not JSON: ${text.slice(0, 120)}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw configError('is not a JSON object');
  const c = value as Record<string, unknown>;
  if (typeof c.cniVersion !== 'string' || !(CNI_VERSIONS as readonly string[]).includes(c.cniVersion)) {
    throw configError(`has cniVersion ${JSON.stringify(c.cniVersion)}: expected one of ${CNI_VERSIONS.join(', ')}`);
  }
  if (typeof c.network !== 'string' || c.network === '') {
    throw configError(
      `has no "network" (got ${JSON.stringify(c.network)}): name the ovsnet network, by Docker network name or ID or logical network name, e.g. "network": "net1"`,
    );
  }
  const valid = c['cni.dev/valid-attachments'];
  let validAttachments: CniConfig['validAttachments'];
  // null is how a Go runtime (libcni) writes an empty list; absent stays absent (GC refuses it).
  if (valid !== undefined) {
    if (valid !== null && !Array.isArray(valid)) throw configError('has "cni.dev/valid-attachments" that is not a list');
    validAttachments = ((valid ?? []) as unknown[]).map((v: unknown) => {
      const o = (typeof v === 'object' && v !== null ? v : {}) as Record<string, unknown>;
      if (typeof o.containerID !== 'string' || typeof o.ifname !== 'string') {
        throw configError(`has a valid attachment ${JSON.stringify(v)}: expected {"containerID": ..., "ifname": ...}`);
      }
      const why = containerIdProblem(o.containerID) ?? ifnameProblem(o.ifname);
      if (why !== undefined) throw configError(`has a valid attachment ${quoted(JSON.stringify(v), 200)} whose name ${why}`);
      return { containerId: o.containerID, ifname: o.ifname };
    });
  }
  // ovsnet answers CHECK from its own record, so prevResult is not read; it must still be a result.
  const prev = c.prevResult;
  if (prev !== undefined && (typeof prev !== 'object' || prev === null || Array.isArray(prev))) {
    throw configError(`has "prevResult" ${quoted(JSON.stringify(prev))}: expected a CNI result object`);
  }
  return {
    cniVersion: c.cniVersion,
    name: typeof c.name === 'string' ? c.name : '',
    network: c.network,
    ...(validAttachments === undefined ? {} : { validAttachments }),
  };
}

/** Longest CNI_ARGS taken: runtimes pass a few K8S_* or IgnoreUnknown pairs. */
const ARGS_MAX = 4096;

/**
 * CNI_ARGS checked for the spec's form, KEY=VALUE pairs separated by ";" (empty pairs skipped,
 * as a trailing ";"), and otherwise ignored: ovsnet takes no arguments, and runtimes pass keys
 * (IgnoreUnknown, K8S_POD_NAME, ...) meant for other plugins in the same list.
 */
export function checkArgs(args: string): void {
  const fail = (why: string) =>
    new OvsnetError('CNI_ENV_INVALID', `CNI_ARGS ${quoted(args)} ${why}: expected KEY=VALUE pairs separated by ";", e.g. IgnoreUnknown=1`);
  if (args.length > ARGS_MAX) throw fail(`is ${args.length} characters long (at most ${ARGS_MAX})`);
  for (const pair of args.split(';')) {
    if (pair === '') continue;
    if (!/^[A-Za-z0-9_]+=[^=]*$/.test(pair)) throw fail(`has ${quoted(pair)}, not one KEY=VALUE`);
  }
}

const ENV_NAME = { containerId: 'CNI_CONTAINERID', netns: 'CNI_NETNS', ifname: 'CNI_IFNAME', args: 'CNI_ARGS' } as const;

/** One field of the request as text (absent: empty); anything else is not what the plugin sends. */
function text(req: Partial<RpcRequest>, field: keyof typeof ENV_NAME): string {
  const v = req[field];
  if (v === undefined) return '';
  if (typeof v !== 'string') throw new OvsnetError('CNI_ENV_INVALID', `${ENV_NAME[field]} is ${quoted(JSON.stringify(v))}: expected text`);
  return v;
}

/**
 * The runtime's command, checked whole before anything is done: what each command needs of
 * the environment, names by the CNI spec's rules, CNI_ARGS's form, the configuration (CNI spec).
 */
export function parseCall(req: Partial<RpcRequest>): CniCall {
  const command = req.command as CniCommand;
  if (!COMMANDS.includes(command)) {
    throw new OvsnetError('CNI_ENV_INVALID', `CNI_COMMAND ${quoted(String(command))} is not one of ${COMMANDS.join(', ')}`);
  }
  const env = { containerId: text(req, 'containerId'), netns: text(req, 'netns'), ifname: text(req, 'ifname') };
  checkArgs(text(req, 'args'));
  const config = parseConfig(typeof req.config === 'string' ? req.config : '');
  const needs = {
    ADD: ['containerId', 'netns', 'ifname'],
    CHECK: ['containerId', 'netns', 'ifname'],
    DEL: ['containerId', 'ifname'],
  } as const;
  for (const field of needs[command as keyof typeof needs] ?? []) {
    if (env[field] === '') throw new OvsnetError('CNI_ENV_INVALID', `${ENV_NAME[field]} is not set: ${command} needs it`);
  }
  const badIf = env.ifname === '' ? undefined : ifnameProblem(env.ifname);
  if (badIf !== undefined) throw new OvsnetError('CNI_ENV_INVALID', `CNI_IFNAME ${quoted(env.ifname)} ${badIf}`);
  const badId = env.containerId === '' ? undefined : containerIdProblem(env.containerId);
  if (badId !== undefined) throw new OvsnetError('CNI_ENV_INVALID', `CNI_CONTAINERID ${quoted(env.containerId)} ${badId}`);
  if (env.netns !== '' && !env.netns.startsWith('/')) {
    throw new OvsnetError('CNI_ENV_INVALID', `CNI_NETNS ${quoted(env.netns)} is not an absolute path (e.g. /run/netns/NAME)`);
  }
  if (command === 'GC' && config.validAttachments === undefined) {
    throw configError(
      'has no "cni.dev/valid-attachments": GC needs the list of attachments still in use (CNI spec 1.1), [] when there are none',
    );
  }
  return { command, ...env, config };
}

/** The ADD result kept in the attachment, in the version `cniVersion` asks for (0.x: IPs carry "version"). */
export function resultIn(result: Record<string, unknown>, cniVersion: string): Record<string, unknown> {
  const ips = (result.ips as { address: string }[] | undefined) ?? [];
  const old = cniVersion.startsWith('0.');
  return {
    ...result,
    cniVersion,
    ips: old ? ips.map((i) => ({ version: i.address.includes(':') ? '6' : '4', ...i })) : ips,
  };
}

/** The CNI 1.0 result of an attachment: its interface, addresses, gateways and default routes. */
export function resultOf(
  a: Pick<Attachment, 'ifname' | 'netns' | 'addresses'>,
  mac: string,
  gateways: readonly string[],
): Record<string, unknown> {
  const gatewayOf = (address: string) => gateways.find((g) => g.includes(':') === address.includes(':'));
  return {
    cniVersion: '1.0.0',
    interfaces: [{ name: a.ifname, mac, sandbox: a.netns }],
    ips: a.addresses.map(({ address }) => {
      const gateway = gatewayOf(address);
      return { address, ...(gateway === undefined ? {} : { gateway }), interface: 0 };
    }),
    routes: gateways.map((gw) => ({ dst: gw.includes(':') ? '::/0' : '0.0.0.0/0', gw })),
    dns: {},
  };
}
