/**
 * Links benchmark: does a netlink call stall ovsnet's event loop while other processes hold
 * the kernel's RTNL lock? A churn loop (namespaces made and deleted, a veth moved into each,
 * as dockerd does for containers) contends for the lock; bench/links-probe.ts measures its
 * own event-loop delay, idle, with netlink calls on its main thread, and with them sent to the
 * link worker. Everything happens in namespaces this bench makes and deletes.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { run } from '../test/harness/host.js';
import { fmt, table } from './stats.js';

const PROBE = fileURLToPath(new URL('./links-probe.js', import.meta.url));
const NS = 'ovsnet-bench-links';
const CHURN = `i=0; while :; do i=$((i+1)); n=ovsnet-blc$i
  ip netns add $n && ip link add blx$i type veth peer name bly$i && ip link set bly$i netns $n
  ip link del blx$i; ip netns del $n; done`;

interface Probe {
  mode: string;
  cycles: number;
  p50: number;
  p99: number;
  max: number;
}

export async function benchLinks(): Promise<void> {
  await run('ip', ['netns', 'add', NS]);
  const churn = spawn('bash', ['-c', CHURN], { stdio: 'ignore', detached: true });
  try {
    const rows: Probe[] = [];
    // Twice each, interleaved: the churn's own rhythm varies.
    for (const mode of ['idle', 'main', 'worker', 'idle', 'main', 'worker']) {
      const r = await run('ip', ['netns', 'exec', NS, process.execPath, PROBE, mode]);
      if (r.code !== 0) throw new Error(`probe ${mode} failed: ${r.stderr}`);
      rows.push(JSON.parse(r.stdout) as Probe);
    }
    const idle = Math.max(...rows.filter((r) => r.mode === 'idle').map((r) => r.p99));
    console.log('event-loop delay of a process making and deleting a veth every 20 ms, while another process churns namespaces\n');
    console.log(
      table(
        ['netlink calls', 'cycles', 'p50 ms', 'p99 ms', 'max ms', 'p99 vs idle'],
        rows.map((r) => [
          r.mode === 'idle' ? 'none (idle)' : r.mode === 'main' ? 'on the main thread (before)' : 'on the link worker (ovsnet)',
          String(r.cycles),
          fmt(r.p50, 2),
          fmt(r.p99, 2),
          fmt(r.max, 2),
          `${fmt(r.p99 / idle)}x`,
        ]),
      ),
    );
  } finally {
    if (churn.pid !== undefined) process.kill(-churn.pid, 'SIGKILL');
    await run('ip', ['netns', 'del', NS]);
    // What the churn left when it was killed mid-loop.
    for (const n of (await run('ip', ['netns', 'list'])).stdout.split('\n').map((l) => l.split(' ')[0] ?? '')) {
      if (n.startsWith('ovsnet-blc')) await run('ip', ['netns', 'del', n]);
    }
    for (const l of (await run('ip', ['-o', 'link', 'show'])).stdout.matchAll(/^\d+: (blx\d+)@/gm))
      await run('ip', ['link', 'del', l[1] ?? '']);
  }
}
