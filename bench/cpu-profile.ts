/**
 * The top frames of a V8 CPU profile (`node --cpu-prof`'s .cpuprofile file) by self time, and
 * the same by owner (Node's own modules, ovsnet's, each package, V8's collector): a frame is a
 * function at a place (name, file, line); the same function reached by several paths is summed.
 * Shares are of the busy time: "(idle)" is left out of the rows and of the total; "(program)" and
 * "(garbage collector)" stay in. A sample counts for the time since the one before, up to twice the
 * profile's median interval: under load the sampling thread itself waits for a core, and the
 * sample after such a wait would otherwise carry the whole wait (one of 400-600 ms was seen
 * inside a timer's bookkeeping in a storm). A window (microseconds of CLOCK_MONOTONIC, the clock of both V8's
 * profile and `process.hrtime`) keeps only the samples taken inside it.
 */
import fs from 'node:fs';
import { fmt } from './stats.js';

/** Where a V8 profile's node runs: the same shape in CPU and heap profiles. */
export interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}

interface ProfileNode {
  readonly id: number;
  readonly callFrame: CallFrame;
}

/** A frame as "name\twhere": the place relative to node_modules or dist (a file URL or a CommonJS module's path), 1-based line. */
export function frameOf(callFrame: CallFrame): string {
  const { functionName, url, lineNumber } = callFrame;
  const where =
    url === '' ? '' : `${url.replace(/^(file:\/\/)?\/.*\/node_modules\//, '').replace(/^(file:\/\/)?\/.*\/dist\//, '')}:${lineNumber + 1}`;
  return `${functionName === '' ? '(anonymous)' : functionName}\t${where}`;
}

interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly startTime: number;
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

/** A span of CLOCK_MONOTONIC in microseconds: `process.hrtime.bigint() / 1000n` at its ends. */
export interface Window {
  readonly fromUs: number;
  readonly toUs: number;
}

/** The monotonic clock now, in microseconds, as a profile's sample times are. */
export const monotonicUs = (): number => Number(process.hrtime.bigint() / 1000n);

/** Self time in microseconds by frame ("name\twhere"), idle left out, inside `window` if given. */
function selfTimes(file: string, window?: Window): { selfUs: Map<string, number>; total: number } {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
  const frameById = new Map<number, string>();
  for (const node of profile.nodes) frameById.set(node.id, frameOf(node.callFrame));
  const selfUs = new Map<string, number>();
  let total = 0;
  let at = profile.startTime;
  const sorted = [...profile.timeDeltas].sort((a, b) => a - b);
  const cap = 2 * (sorted[Math.floor(sorted.length / 2)] ?? 0);
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0;
    at += delta;
    const dt = Math.min(delta, cap);
    if (window !== undefined && (at < window.fromUs || at > window.toUs)) return;
    const frame = frameById.get(id) ?? '(unknown)\t';
    if (frame.startsWith('(idle)')) return;
    selfUs.set(frame, (selfUs.get(frame) ?? 0) + dt);
    total += dt;
  });
  return { selfUs, total };
}

/** Rows of [self % of busy time, self ms, function, where], the `limit` largest first. */
export function topFrames(file: string, limit: number, window?: Window): string[][] {
  const { selfUs, total } = selfTimes(file, window);
  return [...selfUs.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, limit)
    .map(([frame, us]) => {
      const [name = '', where = ''] = frame.split('\t');
      return [fmt((100 * us) / total, 1), fmt(us / 1000, 0), name, where];
    });
}

/** Who a frame's code belongs to, from its place. */
export function ownerOf(frame: string): string {
  const [name = '', where = ''] = frame.split('\t');
  if (where === '') return name.startsWith('(') ? name : 'no place (natives, V8 builtins)';
  if (where.startsWith('node:')) return "Node's own modules";
  if (where.startsWith('src/')) return `ovsnet: ${where.split('/').slice(1, 3).join('/').replace(/:\d+$/, '')}`;
  if (where.startsWith('file://') || where.startsWith('/')) return 'other files';
  const parts = where.split('/');
  return (parts[0]?.startsWith('@') === true ? parts.slice(0, 2).join('/') : (parts[0] ?? '')).replace(/:\d+$/, '');
}

/** Rows of [self % of busy time, self ms, owner], largest first; the busy ms in the last row. */
export function topOwners(file: string, window?: Window): string[][] {
  const { selfUs, total } = selfTimes(file, window);
  const byOwner = new Map<string, number>();
  for (const [frame, us] of selfUs) {
    const owner = ownerOf(frame);
    byOwner.set(owner, (byOwner.get(owner) ?? 0) + us);
  }
  return [
    ...[...byOwner.entries()].sort((a, b) => b[1] - a[1]).map(([owner, us]) => [fmt((100 * us) / total, 1), fmt(us / 1000, 0), owner]),
    ['100', fmt(total / 1000, 0), 'busy in all'],
  ];
}
