/**
 * A bare Node.js process measuring its own event-loop delay as prom-client measures ovsnet's
 * (monitorEventLoopDelay, the same 10 ms timer), forked by LoopProbe (loop-delay.ts): the churn
 * and cluster benches read it over the same windows as ovsnet, so that what the machine's load
 * does to any process's loop stands beside what ovsnet's own work adds. On its IPC channel:
 * "read" answers the window's p50, p99 and max in nanoseconds and starts a new window.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { LOOP_TIMER_MS } from './loop-delay.js';

const h = monitorEventLoopDelay({ resolution: LOOP_TIMER_MS });
h.enable();
process.on('message', (msg) => {
  if (msg !== 'read') return;
  process.send?.({ p50: h.percentile(50), p99: h.percentile(99), max: h.max });
  h.reset();
});
// Ends with its parent (the IPC channel closes).
process.on('disconnect', () => process.exit(0));
process.send?.('ready');
