/**
 * A CNI command as the daemon checks it (pure): the runtime's environment and network
 * configuration (CNI spec: CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, stdin's cniVersion, name,
 * type and ovsnet's `network`), and the ADD result in the version the configuration asks for.
 */
import { OvsnetError } from '../lib/errors.js';
import type { Attachment } from './attachments.js';
import { CNI_VERSIONS, type CniCommand, type RpcRequest } from './protocol.js';

export interface CniConfig {
  readonly cniVersion: string;
  /** The CNI network's name (stdin `name`). */
  readonly name: string;
  /** The ovsnet network: a Docker network name or ID, or a logical network name. */
  readonly network: string;
  /** GC (CNI 1.1): the attachments the runtime still has; every other of this network goes. */
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
  if (valid !== undefined) {
    if (!Array.isArray(valid)) throw configError('has "cni.dev/valid-attachments" that is not a list');
    validAttachments = valid.map((v: unknown) => {
      const o = (typeof v === 'object' && v !== null ? v : {}) as Record<string, unknown>;
      if (typeof o.containerID !== 'string' || typeof o.ifname !== 'string') {
        throw configError(`has a valid attachment ${JSON.stringify(v)}: expected {"containerID": ..., "ifname": ...}`);
      }
      return { containerId: o.containerID, ifname: o.ifname };
    });
  }
  return {
    cniVersion: c.cniVersion,
    name: typeof c.name === 'string' ? c.name : '',
    network: c.network,
    ...(validAttachments === undefined ? {} : { validAttachments }),
  };
}

/** The runtime's command, checked: what each command needs of the environment (CNI spec). */
export function parseCall(req: RpcRequest): CniCall {
  if (!COMMANDS.includes(req.command)) {
    throw new OvsnetError('CNI_ENV_INVALID', `CNI_COMMAND ${JSON.stringify(req.command)} is not one of ${COMMANDS.join(', ')}`);
  }
  const config = parseConfig(req.config);
  const needs = {
    ADD: ['containerId', 'netns', 'ifname'],
    CHECK: ['containerId', 'netns', 'ifname'],
    DEL: ['containerId', 'ifname'],
  } as const;
  const envName = { containerId: 'CNI_CONTAINERID', netns: 'CNI_NETNS', ifname: 'CNI_IFNAME' } as const;
  for (const field of needs[req.command as keyof typeof needs] ?? []) {
    if (typeof req[field] !== 'string' || req[field] === '')
      throw new OvsnetError('CNI_ENV_INVALID', `${envName[field]} is not set: ${req.command} needs it`);
  }
  if (req.ifname !== '' && !/^[A-Za-z0-9_.-]{1,15}$/.test(req.ifname)) {
    throw new OvsnetError(
      'CNI_ENV_INVALID',
      `CNI_IFNAME ${JSON.stringify(req.ifname)} is not an interface name: 1-15 letters, digits, "-", "_" or "."`,
    );
  }
  if (req.containerId.length > 256 || /[/\s]/.test(req.containerId)) {
    throw new OvsnetError(
      'CNI_ENV_INVALID',
      `CNI_CONTAINERID ${JSON.stringify(req.containerId.slice(0, 80))} is not a container ID: up to 256 characters, no "/" or spaces`,
    );
  }
  return { command: req.command, containerId: req.containerId, netns: req.netns, ifname: req.ifname, config };
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
