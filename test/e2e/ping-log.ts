/**
 * Traffic through restarts, as the e2e tests read it: a background `ping -i 0.1` in a container
 * writing to a file (its answered icmp_seq numbers; the missing ones were lost), and ovsnet's JSON
 * log lines.
 */
import { until } from './cluster-setup.js';

/** What a ping log said when read at `at`: the icmp_seq numbers answered, and the last of them. */
export interface PingLog {
  at: number;
  seqs: Set<number>;
  maxSeq: number;
}

/** Parses busybox ping's output, read just now. */
export function pingLog(text: string): PingLog {
  const seqs = new Set([...text.matchAll(/seq=(\d+) /g)].map((m) => Number(m[1])));
  return { at: Date.now(), seqs, maxSeq: Math.max(-1, ...seqs) };
}

/** The pings sent after `before` up to the last one `after` saw answered that got no answer. */
export function missing(before: PingLog, after: PingLog, upTo = after.maxSeq): number[] {
  const lost: number[] = [];
  for (let s = before.maxSeq + 1; s <= upTo; s++) if (!after.seqs.has(s)) lost.push(s);
  return lost;
}

/** Pings sent and lost from `before` to `after`. */
export function pingLoss(before: PingLog, after: PingLog): { sent: number; lost: number } {
  return { sent: after.maxSeq - before.maxSeq, lost: missing(before, after).length };
}

/** When ping `seq` was sent (ms since the epoch, to about 0.1 s), from two reads' last answered pings. */
export function sentAt(before: PingLog, after: PingLog, seq: number): number {
  const interval = (after.at - before.at) / Math.max(1, after.maxSeq - before.maxSeq);
  return before.at + (seq - before.maxSeq) * interval;
}

/** The next line of `daemon`'s log matching `re` after its first `from` characters, parsed (undefined after `ms`). */
export async function logLine(
  daemon: { log: string },
  re: RegExp,
  from: number,
  ms = 10_000,
): Promise<Record<string, unknown> | undefined> {
  let found: string | undefined;
  await until(
    async () =>
      (found = daemon.log
        .slice(from)
        .split('\n')
        .find((l) => re.test(l))) !== undefined,
    ms,
  );
  return found === undefined ? undefined : (JSON.parse(found) as Record<string, unknown>);
}
