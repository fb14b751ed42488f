/**
 * What a process allocates, by function and by owner, from V8's sampling heap profiler run over
 * the inspector with the objects the collector has already freed kept in (a request path's
 * allocations are almost all short-lived: without them the profile shows only what survives).
 * Each sample stands for about `SAMPLE_BYTES` of allocation; figures are V8's estimates, not
 * counts. A builtin's allocation (no place: Map, an iterator's next, push) is named with the
 * nearest caller that has one, and counts for that caller's owner: an iterator made in ovsnet's
 * loop is ovsnet's. Used by the requests bench's server (BENCH_HEAP_PROF) and, through
 * heap-sampler.ts, the builds bench (BENCH_HEAP_DIR).
 */
import fs from 'node:fs';
import { Session } from 'node:inspector/promises';
import { fmt } from './stats.js';
import { frameOf, ownerOf, type CallFrame } from './cpu-profile.js';

const SAMPLE_BYTES = 1024;

interface HeapNode {
  readonly callFrame: CallFrame;
  readonly selfSize: number;
  readonly children: readonly HeapNode[];
}

/** Bytes allocated by frame ("name\twhere") over one sampling. */
export type Allocations = Record<string, number>;

/**
 * Starts sampling; the returned function stops it and gives the bytes by frame. With `raw`, the
 * whole profile (its call tree: who called what allocated) is written there too.
 */
export async function sampleAllocations(raw?: string): Promise<() => Promise<Allocations>> {
  const session = new Session();
  session.connect();
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: SAMPLE_BYTES,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  return async () => {
    const { profile } = (await session.post('HeapProfiler.stopSampling')) as { profile: { head: HeapNode } };
    session.disconnect();
    if (raw !== undefined) fs.writeFileSync(raw, JSON.stringify(profile));
    const bytes: Allocations = {};
    const walk = (node: HeapNode, placed: string | undefined): void => {
      const own = frameOf(node.callFrame);
      const [name = ''] = own.split('\t');
      const frame = node.callFrame.url === '' && placed !== undefined ? `${name} in ${placed}` : own;
      if (node.selfSize > 0) bytes[frame] = (bytes[frame] ?? 0) + node.selfSize;
      for (const child of node.children) walk(child, node.callFrame.url === '' ? placed : own);
    };
    walk(profile.head, undefined);
    return bytes;
  };
}

/** Rows of [bytes per unit, share %, owner], largest first, the total last. */
export function allocationOwners(bytes: Allocations, per: number): string[][] {
  const total = Object.values(bytes).reduce((a, b) => a + b, 0);
  const byOwner = new Map<string, number>();
  for (const [frame, b] of Object.entries(bytes)) {
    const owner = ownerOf(frame);
    byOwner.set(owner, (byOwner.get(owner) ?? 0) + b);
  }
  return [
    ...[...byOwner.entries()].sort((a, b) => b[1] - a[1]).map(([owner, b]) => [fmt(b / per, 0), fmt((100 * b) / total, 1), owner]),
    [fmt(total / per, 0), '100', 'all'],
  ];
}

/** Rows of [bytes per unit, share %, function, where], the `limit` largest first. */
export function allocationFrames(bytes: Allocations, per: number, limit: number): string[][] {
  const total = Object.values(bytes).reduce((a, b) => a + b, 0);
  return Object.entries(bytes)
    .sort((a, b) => b[1] - a[1])
    .slice(0, limit)
    .map(([frame, b]) => {
      const [name = '', where = ''] = frame.split('\t');
      return [fmt(b / per, 0), fmt((100 * b) / total, 1), name, where];
    });
}
