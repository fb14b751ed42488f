/**
 * Child of bench/links.ts, run inside a namespace of its own: creates and deletes a veth pair
 * every 20 ms for BENCH_SECONDS while measuring this process's event-loop delay, with the
 * netlink calls made on the main thread (`main`, what ovsnet did before the link worker) or
 * sent to the link worker (`worker`, what Links does), or none (`idle`). Prints one JSON line.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Links } from '../src/driver/links/links.js';
import { NetlinkOps } from '../src/driver/links/netlink-ops.js';

const mode = process.argv[2];
const seconds = Number(process.env.BENCH_SECONDS ?? 8);
const spec = { host: 'blh0', container: 'blc0', mtu: 1500, replace: true };
const links = new Links();
const ops = mode === 'main' ? NetlinkOps.open() : undefined;
const cycle = async (): Promise<void> => {
  if (ops !== undefined) {
    await ops.createVeth(spec);
    await ops.deleteLink(spec.host);
  } else {
    await links.createVeth(spec);
    await links.deleteLink(spec.host);
  }
};
const h = monitorEventLoopDelay({ resolution: 2 });
h.enable();
let cycles = 0;
const until = Date.now() + seconds * 1000;
while (Date.now() < until) {
  if (mode !== 'idle') {
    await cycle();
    cycles++;
  }
  await new Promise((r) => setTimeout(r, 20));
}
h.disable();
ops?.close();
await links.close();
const ms = (ns: number) => ns / 1e6;
console.log(JSON.stringify({ mode, cycles, p50: ms(h.percentile(50)), p99: ms(h.percentile(99)), max: ms(h.max) }));
