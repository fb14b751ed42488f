/**
 * The container's side of a CNI attachment, in the namespace the runtime gives (CNI_NETNS, a
 * path): the container end of the endpoint's veth is moved there, renamed to CNI_IFNAME, given
 * its addresses and default routes, and brought up. Node cannot enter a namespace, so this is
 * iproute2 (`ip link set ... netns PATH`, then `nsenter --net=PATH ip -batch -`): two processes,
 * a few milliseconds. The runtime's path is opened once (openNetns) and checked by what was
 * opened; iproute2 is then given the daemon's descriptor (/proc/PID/fd/N), never the path again,
 * so a path swapped after the check (a symlink repointed, a file replaced) changes nothing.
 */
import fs from 'node:fs';
import { OvsnetError } from '../lib/errors.js';
import { exec, failed, type Run } from '../lib/exec.js';
import { quoted } from './names.js';

/** Bound on one `ip` command. */
const IP_TIMEOUT_MS = 10_000;

export interface InterfaceSpec {
  /** The runtime's CNI_NETNS, for messages. */
  readonly netns: string;
  /** The path tools open: the daemon's descriptor of the checked namespace (NetnsHandle.path). */
  readonly via?: string;
  /** The container end of the veth, in this (the daemon's) namespace. */
  readonly device: string;
  readonly ifname: string;
  /** CIDR forms. */
  readonly addresses: readonly string[];
  /** Default gateways (plain addresses), one per family at most. */
  readonly gateways: readonly string[];
}

/** A network namespace the daemon holds open: `path` names the descriptor, not the runtime's path. */
export interface NetnsHandle {
  readonly path: string;
  close(): void;
}

/** What CNI needs done in a container's namespace (a fake in the unit tests). */
export interface NetnsOps {
  /** Opens and checks CNI_NETNS (openNetns); fails with CNI_ENV_INVALID saying what it is instead. */
  open(netns: string): Promise<NetnsHandle>;
  /** Moves and configures the interface; fails with CNI_INTERFACE_FAILED saying which step. */
  attach(spec: InterfaceSpec): Promise<void>;
  /** What is wrong with the interface in the namespace (CHECK), or undefined when it is as ADD left it. */
  problem(netns: string, ifname: string, addresses: readonly string[], via?: string): Promise<string | undefined>;
}

/** An `ip` (or `nsenter ... ip`) command's stdout; its failure names the command and its stderr. */
async function ip(run: Run, args: readonly string[], input?: string): Promise<string> {
  const [cmd = 'ip', ...rest] = args;
  const r = await run(cmd, rest, input, IP_TIMEOUT_MS);
  const err = failed(cmd, rest, r);
  if (err !== undefined) throw err;
  return r.stdout;
}

/** A namespace file's identity: nsfs's device and the namespace's inode; undefined when not visible. */
function nsId(file: string): string | undefined {
  try {
    const st = fs.statSync(file);
    return `${st.dev}:${st.ino}`;
  } catch {
    return undefined;
  }
}

/** statfs's f_type of nsfs, the file system of namespace files. */
const NSFS_MAGIC = 0x6e736673;

/**
 * The kind of namespace an nsfs descriptor holds: its link reads KIND:[INODE] when opened
 * through /proc/PID/ns/*, and a bind mount of it (/run/netns/NAME) is in this process's
 * mountinfo with root KIND:[INODE]. Undefined when neither tells.
 */
function nsKind(fd: number, ino: number): string | undefined {
  const own = /^([a-z_]+):\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/self/fd/${fd}`));
  if (own !== null) return own[1];
  for (const line of fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const m = /^\S+ \S+ \S+ ([a-z_]+):\[(\d+)\] .* - nsfs /.exec(line);
    if (m !== null && Number(m[2]) === ino) return m[1];
  }
  return undefined;
}

/**
 * Opens CNI_NETNS once and checks what was opened: a network namespace (on nsfs, of kind net),
 * neither the daemon's own nor PID 1's (the host's). Devices, FIFOs, sockets and directories
 * are refused before opening (opening some has effects or blocks); O_NONBLOCK keeps a FIFO
 * swapped in meanwhile from blocking. Links are followed (/proc/PID/ns/net is one): the check
 * is on the namespace reached, not on the path.
 */
export function openNetns(netns: string): NetnsHandle {
  const refuse = (why: string) =>
    new OvsnetError(
      'CNI_ENV_INVALID',
      `CNI_NETNS ${quoted(netns)} ${why}: give the container's network namespace (e.g. /run/netns/NAME or /proc/PID/ns/net)`,
    );
  if (!netns.startsWith('/')) throw refuse('is not an absolute path');
  let st: fs.Stats | undefined;
  try {
    st = fs.statSync(netns, { throwIfNoEntry: false });
  } catch (err) {
    throw refuse(`cannot be reached (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  if (st === undefined) throw refuse('does not exist');
  if (!st.isFile()) throw refuse('is not a namespace file (a directory, device, FIFO or socket)');
  let fd: number;
  try {
    fd = fs.openSync(netns, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK | fs.constants.O_NOCTTY);
  } catch (err) {
    throw refuse(`cannot be opened (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  try {
    const via = `/proc/${process.pid}/fd/${fd}`;
    if (fs.statfsSync(via).type !== NSFS_MAGIC) throw refuse('is not a namespace (a plain file)');
    const opened = fs.fstatSync(fd);
    const kind = nsKind(fd, opened.ino);
    if (kind !== 'net')
      throw refuse(kind === undefined ? 'is a namespace of a kind not told' : `is a ${kind} namespace, not a network namespace`);
    const id = `${opened.dev}:${opened.ino}`;
    if (id === nsId('/proc/self/ns/net')) throw refuse("is the ovsnet daemon's own network namespace (the host's)");
    if (id === nsId('/proc/1/ns/net')) throw refuse("is PID 1's network namespace (the host's)");
    return { path: via, close: () => fs.closeSync(fd) };
  } catch (err) {
    fs.closeSync(fd);
    throw err;
  }
}

/** The namespace work done with iproute2, its processes run by `run` (the daemon's, measured). */
export const ipNetns = (run: Run): NetnsOps => ({
  open(netns) {
    return Promise.resolve().then(() => openNetns(netns));
  },

  async attach(spec) {
    const via = spec.via ?? spec.netns;
    const inside = ['nsenter', `--net=${via}`, 'ip', '-batch', '-'];
    const fail = (step: string) => (err: unknown) => {
      throw new OvsnetError('CNI_INTERFACE_FAILED', `cannot ${step} in ${spec.netns}: ${err instanceof Error ? err.message : String(err)}`);
    };
    await ip(run, ['ip', 'link', 'set', 'dev', spec.device, 'netns', via]).catch(fail(`move ${spec.device} into the namespace`));
    const batch = [
      `link set dev ${spec.device} name ${spec.ifname}`,
      ...spec.addresses.map((a) => `${a.includes(':') ? '-6 ' : ''}addr add ${a} dev ${spec.ifname}`),
      `link set dev ${spec.ifname} up`,
      ...spec.gateways.map((g) => `${g.includes(':') ? '-6 ' : ''}route add default via ${g} dev ${spec.ifname}`),
    ];
    await ip(run, inside, `${batch.join('\n')}\n`).catch(fail(`configure ${spec.ifname} (${batch.join('; ')})`));
  },

  async problem(netns, ifname, addresses, via = netns) {
    if (!fs.existsSync(via)) return `the network namespace ${netns} is gone`;
    let shown: { operstate?: string; addr_info?: { local: string; prefixlen: number }[] }[];
    try {
      shown = JSON.parse(await ip(run, ['nsenter', `--net=${via}`, 'ip', '-j', 'addr', 'show', 'dev', ifname])) as typeof shown;
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
