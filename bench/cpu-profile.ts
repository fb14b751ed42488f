/**
 * The top frames of a V8 CPU profile (`node --cpu-prof`'s .cpuprofile file) by self time, for the
 * requests benchmark: a frame is a function at a place (name, file, line); the same function
 * reached by several paths is summed. Shares are of the busy time: "(idle)" is left out of the
 * rows and of the total; "(program)" and "(garbage collector)" stay in.
 */
import fs from 'node:fs';
import { fmt } from './stats.js';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
}

interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

/** Rows of [self % of busy time, self ms, function, where], the `limit` largest first. */
export function topFrames(file: string, limit: number): string[][] {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
  const frameOf = new Map<number, string>();
  for (const node of profile.nodes) {
    const { functionName, url, lineNumber } = node.callFrame;
    const where =
      url === '' ? '' : `${url.replace(/^file:\/\/.*\/node_modules\//, '').replace(/^file:\/\/.*\/dist\//, '')}:${lineNumber + 1}`;
    frameOf.set(node.id, `${functionName === '' ? '(anonymous)' : functionName}\t${where}`);
  }
  const selfUs = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i] ?? 0;
    const frame = frameOf.get(id) ?? '(unknown)\t';
    if (frame.startsWith('(idle)')) return;
    selfUs.set(frame, (selfUs.get(frame) ?? 0) + dt);
    total += dt;
  });
  return [...selfUs.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, limit)
    .map(([frame, us]) => {
      const [name = '', where = ''] = frame.split('\t');
      return [fmt((100 * us) / total, 1), fmt(us / 1000, 0), name, where];
    });
}
