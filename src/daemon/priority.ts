/**
 * The daemon's scheduling priority (OVSNET_NICE). ovsnet answers Docker on the path of every
 * container start, as Open vSwitch's daemons do for every packet, and those run at nice -10
 * (ovs-ctl's default): an operator may want ovsnet to as well. Two things set what share of the cores a task gets when they are scarce:
 *
 * - each thread's nice value, against the tasks of the same scheduling group;
 * - with the kernel's autogroups (CONFIG_SCHED_AUTOGROUP, on in Debian's and Ubuntu's kernels),
 *   the session's group, against every other session outside a CPU cgroup of its own: the groups
 *   share the cores equally, however many tasks each has, unless a group's nice says otherwise
 *   (/proc/PID/autogroup, one value for the whole session).
 *
 * At start, before the daemon's modules load, every thread of the process is given the value
 * (threads made later, the link worker and libuv's pool, inherit the main thread's), and so is
 * the autogroup when ovsnet leads its session (systemd's service, the managed plugin, a harness's
 * setsid): a session it shares with a terminal's shell is left as it is. In a CPU cgroup of its
 * own (cgroup v2 with the cpu controller on) the cgroup's weight decides instead, and the
 * values only order ovsnet's threads among themselves (docs/operators-guide.md).
 *
 * 'inherit', the default, does none of it: at -10 the storms' loop delay fell to a quarter, but
 * the storms took longer and ovsnet's CPU per start rose (docs/benchmarks.md). Lowering a nice
 * value takes CAP_SYS_NICE, which no launcher of ovsnet gives: without it ovsnet says so once and
 * runs at the priority it was started with.
 */
import fs from 'node:fs';
import os from 'node:os';
import { messageOf } from '../lib/errors.js';

export type Nice = number | 'inherit';

/** The kernel's interfaces the priority is set through; a fake in the unit tests. */
export interface SchedulerOs {
  /** The process's thread ids (/proc/self/task). */
  threads(): readonly number[];
  niceOf(tid: number): number;
  setNice(tid: number, nice: number): void;
  /** True when this process leads its session (the autogroup is its own). */
  leadsSession(): boolean;
  /** The autogroup's nice; undefined without autogroups. */
  groupNice(): number | undefined;
  setGroupNice(nice: number): void;
}

export interface PriorityReport {
  readonly nice: Nice;
  /** Threads given the value (the others had it already or ended meanwhile). */
  readonly threadsSet: number;
  /** What became of the session's autogroup. */
  readonly group: 'set' | 'had it' | 'shared session: left' | 'no autogroups' | 'inherit' | 'not tried' | 'refused';
  /** Why the value could not be given (no CAP_SYS_NICE), with the priority kept. */
  readonly refused?: string;
}

const codeOf = (err: unknown): string | undefined => (err as { code?: unknown } | null)?.code as string | undefined;
// os.setPriority throws Node's SystemError (code ERR_SYSTEM_ERROR): its errno is in the message.
const denied = (err: unknown) => ['EACCES', 'EPERM'].includes(codeOf(err) ?? '') || /EACCES|EPERM|permission/i.test(messageOf(err));
/** A thread that ended between the listing and the call. */
const gone = (err: unknown) => codeOf(err) === 'ESRCH' || /ESRCH|no such process/i.test(messageOf(err));

/** Gives every thread, and the session's autogroup when it is ovsnet's alone, the nice value `nice`. */
export function applyPriority(nice: Nice, sched: SchedulerOs): PriorityReport {
  if (nice === 'inherit') return { nice, threadsSet: 0, group: 'inherit' };
  /** Each thread changed and its value before: put back when a later one is refused. */
  const changed: [tid: number, before: number][] = [];
  for (const tid of sched.threads()) {
    try {
      const before = sched.niceOf(tid);
      if (before === nice) continue;
      sched.setNice(tid, nice);
      changed.push([tid, before]);
    } catch (err) {
      if (gone(err)) continue;
      if (!denied(err)) throw err;
      // A higher value than a thread has is anyone's to set: putting one back is never refused.
      for (const [t, before] of changed) tryQuietly(() => sched.setNice(t, before));
      return { nice, threadsSet: 0, group: 'not tried', refused: refusal(nice, err, sched) };
    }
  }
  const threadsSet = changed.length;
  const had = sched.groupNice();
  if (had === undefined) return { nice, threadsSet, group: 'no autogroups' };
  if (!sched.leadsSession()) return { nice, threadsSet, group: 'shared session: left' };
  if (had === nice) return { nice, threadsSet, group: 'had it' };
  try {
    sched.setGroupNice(nice);
  } catch (err) {
    if (denied(err)) return { nice, threadsSet, group: 'refused', refused: refusal(nice, err, sched) };
    throw err;
  }
  return { nice, threadsSet, group: 'set' };
}

function tryQuietly(fn: () => void): void {
  try {
    fn();
  } catch {
    // a thread that ended meanwhile
  }
}

function refusal(nice: number, err: unknown, sched: SchedulerOs): string {
  let now = '';
  try {
    now = ` (${sched.niceOf(0)})`;
  } catch {
    // the message says "the priority it was started with" either way
  }
  return (
    `cannot set ovsnet's scheduling priority to nice ${nice} (OVSNET_NICE): ${messageOf(err)}. ` +
    `It runs at the priority it was started with${now}. Giving a thread a lower nice value takes CAP_SYS_NICE ` +
    `(the managed plugin has none; for the systemd unit, a drop-in with CapabilityBoundingSet=CAP_SYS_NICE); or set OVSNET_NICE=inherit, the default, to keep the start's priority without this warning`
  );
}

/** Linux's: /proc/self/task, setpriority(2) per thread, /proc/self/stat's session, /proc/self/autogroup. */
export const linuxScheduler: SchedulerOs = {
  threads: () =>
    fs
      .readdirSync('/proc/self/task')
      .filter((name) => /^\d{1,10}$/.test(name))
      .map(Number),
  niceOf: (tid) => os.getPriority(tid),
  setNice: (tid, nice) => os.setPriority(tid, nice),
  leadsSession: () => sessionOf(fs.readFileSync('/proc/self/stat', 'utf8')) === process.pid,
  groupNice: () => {
    try {
      return groupNiceOf(fs.readFileSync('/proc/self/autogroup', 'utf8'));
    } catch (err) {
      if (codeOf(err) === 'ENOENT') return undefined; // a kernel without autogroups
      throw err;
    }
  },
  setGroupNice: (nice) => fs.writeFileSync('/proc/self/autogroup', String(nice)),
};

/**
 * The session id from a /proc/PID/stat line: the sixth field, counted after the command's
 * closing parenthesis (the command may itself hold spaces and parentheses). NaN when malformed.
 */
export function sessionOf(stat: string): number {
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // After ")": state, ppid, pgrp, session.
  return rest.length >= 4 && /^\d+$/.test(rest[3] ?? '') ? Number(rest[3]) : NaN;
}

/** The nice value of a /proc/PID/autogroup line ("/autogroup-123 nice -10"); undefined when malformed. */
export function groupNiceOf(line: string): number | undefined {
  const m = /^\/autogroup-\d+ nice (-?\d{1,2})\n?$/.exec(line);
  return m === null ? undefined : Number(m[1]);
}
