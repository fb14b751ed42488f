/**
 * TCP throughput out of a container, as the receiver sees it: a sink in the host's namespace at
 * ADDR:PORT counts what arrives from 1 s after the first byte (the burst allowance and slow
 * start left out) to `untilS` seconds, and prints mbit/s. For QoS checks by their effect.
 */
import { spawn } from 'node:child_process';
import type { DockerHost } from './host.js';

const SINK = `
const [addr, port, until] = process.argv.slice(1);
let total = 0, first, at1, atEnd;
require('net').createServer((s) => {
  s.on('data', (d) => {
    total += d.length;
    const now = Date.now();
    first ??= now;
    if (at1 === undefined && now - first >= 1000) at1 = { t: now, n: total };
    if (atEnd === undefined && now - first >= Number(until) * 1000) { atEnd = { t: now, n: total }; console.log(((atEnd.n - at1.n) * 8) / ((atEnd.t - at1.t) / 1000) / 1e6); process.exit(0); }
  });
  s.on('error', () => undefined);
}).listen(Number(port), addr, () => console.log('listening'));
setTimeout(() => { console.log('timeout: ' + total + ' bytes, first at ' + first); process.exit(1); }, 25000);
`;

/** Mbit/s from `container` to a sink on the host's ADDR:PORT (started first: the sender is refused otherwise). */
export async function throughput(host: DockerHost, container: string, addr: string, port: number, untilS = 6): Promise<number> {
  const sink = spawn('ip', ['netns', 'exec', host.name, process.execPath, '-e', SINK, addr, String(port), String(untilS)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const listening = new Promise<void>((resolve) =>
    sink.stdout.on('data', (d: Buffer) => ((out += d.toString()), out.includes('listening') && resolve())),
  );
  const done = new Promise<void>((resolve) => sink.on('close', () => resolve()));
  await Promise.race([listening, done]);
  const send = host.docker(['exec', container, 'sh', '-c', `dd if=/dev/zero bs=64k count=200000 2>/dev/null | nc ${addr} ${port}`], 30_000);
  await Promise.all([done, send]);
  const mbit = Number(/^([\d.]+)$/m.exec(out)?.[1]);
  if (!Number.isFinite(mbit)) throw new Error(`no measurement from ${container}: ${out}`);
  return mbit;
}
