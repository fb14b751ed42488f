/**
 * The container's side of a CNI attachment, in the namespace the runtime gives (CNI_NETNS, a
 * path): the container end of the endpoint's veth is moved there, renamed to CNI_IFNAME, given
 * its addresses and default routes, and brought up. Node cannot enter a namespace, so this is
 * iproute2 (`ip link set ... netns PATH`, then `nsenter --net=PATH ip -batch -`): two processes,
 * a few milliseconds.
 */
import fs from 'node:fs';
import { OvsnetError } from '../lib/errors.js';
import { exec, failed, type Run } from '../lib/exec.js';

/** Bound on one `ip` command. */
const IP_TIMEOUT_MS = 10_000;

export interface InterfaceSpec {
  readonly netns: string;
  /** The container end of the veth, in this (the daemon's) namespace. */
  readonly device: string;
  readonly ifname: string;
  /** CIDR forms. */
  readonly addresses: readonly string[];
  /** Default gateways (plain addresses), one per family at most. */
  readonly gateways: readonly string[];
}

/** What CNI needs done in a container's namespace (a fake in the unit tests). */
export interface NetnsOps {
  /** Moves and configures the interface; fails with CNI_INTERFACE_FAILED saying which step. */
  attach(spec: InterfaceSpec): Promise<void>;
  /** What is wrong with the interface in the namespace (CHECK), or undefined when it is as ADD left it. */
  problem(netns: string, ifname: string, addresses: readonly string[]): Promise<string | undefined>;
}

/** An `ip` (or `nsenter ... ip`) command's stdout; its failure names the command and its stderr. */
async function ip(run: Run, args: readonly string[], input?: string): Promise<string> {
  const [cmd = 'ip', ...rest] = args;
  const r = await run(cmd, rest, input, IP_TIMEOUT_MS);
  const err = failed(cmd, rest, r);
  if (err !== undefined) throw err;
  return r.stdout;
}

/** CNI_NETNS must name a namespace file that exists. */
export function checkNetns(netns: string): void {
  if (!netns.startsWith('/') || !fs.existsSync(netns)) {
    throw new OvsnetError(
      'CNI_ENV_INVALID',
      `CNI_NETNS ${JSON.stringify(netns)} is not an existing network namespace path (e.g. /run/netns/NAME or /proc/PID/ns/net)`,
    );
  }
}

/** The namespace work done with iproute2, its processes run by `run` (the daemon's, measured). */
export const ipNetns = (run: Run): NetnsOps => ({
  async attach(spec) {
    checkNetns(spec.netns);
    const inside = ['nsenter', `--net=${spec.netns}`, 'ip', '-batch', '-'];
    const fail = (step: string) => (err: unknown) => {
      throw new OvsnetError('CNI_INTERFACE_FAILED', `cannot ${step} in ${spec.netns}: ${err instanceof Error ? err.message : String(err)}`);
    };
    await ip(run, ['ip', 'link', 'set', 'dev', spec.device, 'netns', spec.netns]).catch(fail(`move ${spec.device} into the namespace`));
    const batch = [
      `link set dev ${spec.device} name ${spec.ifname}`,
      ...spec.addresses.map((a) => `${a.includes(':') ? '-6 ' : ''}addr add ${a} dev ${spec.ifname}`),
      `link set dev ${spec.ifname} up`,
      ...spec.gateways.map((g) => `${g.includes(':') ? '-6 ' : ''}route add default via ${g} dev ${spec.ifname}`),
    ];
    await ip(run, inside, `${batch.join('\n')}\n`).catch(fail(`configure ${spec.ifname} (${batch.join('; ')})`));
  },

  async problem(netns, ifname, addresses) {
    if (!fs.existsSync(netns)) return `the network namespace ${netns} is gone`;
    let shown: { operstate?: string; addr_info?: { local: string; prefixlen: number }[] }[];
    try {
      shown = JSON.parse(await ip(run, ['nsenter', `--net=${netns}`, 'ip', '-j', 'addr', 'show', 'dev', ifname])) as typeof shown;
    } catch (err) {
      return `${ifname} is not in ${netns} (${err instanceof Error ? err.message : String(err)})`;
    }
    const link = shown[0];
    const held = new Set((link?.addr_info ?? []).map((a) => `${a.local}/${a.prefixlen}`));
    const missing = addresses.filter((a) => !held.has(a));
    if (missing.length > 0) return `${ifname} in ${netns} lacks ${missing.join(', ')}`;
    if (link?.operstate === 'DOWN') return `${ifname} in ${netns} is down`;
    return undefined;
  },
});

export const iproute2: NetnsOps = ipNetns(exec);
