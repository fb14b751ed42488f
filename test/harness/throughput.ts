/**
 * TCP throughput out of a container, as the receiver sees it: a sink at ADDR:PORT (in the host's
 * namespace, or in another container's) counts what arrives from 1 s after the first byte (the
 * burst allowance and slow start left out) to `untilS` seconds, and prints mbit/s. For QoS checks
 * by their effect, and for the benchmarks' container-to-container figures.
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

/** Runs the sink under `enter` (a command that runs the rest in some network namespace), then the sender in `container`. */
async function sinkAndSend(enter: readonly string[], host: DockerHost, container: string, addr: string, port: number, untilS: number) {
  const [cmd, ...args] = [...enter, process.execPath, '-e', SINK, addr, String(port), String(untilS)];
  const sink = spawn(cmd ?? 'false', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const listening = new Promise<void>((resolve) =>
    sink.stdout.on('data', (d: Buffer) => ((out += d.toString()), out.includes('listening') && resolve())),
  );
  const done = new Promise<void>((resolve) => sink.on('close', () => resolve()));
  await Promise.race([listening, done]);
  const send = host.docker(['exec', container, 'sh', '-c', `dd if=/dev/zero bs=64k count=200000 2>/dev/null | nc ${addr} ${port}`], 30_000);
  await Promise.all([done, send]);
  const mbit = Number(/^([\d.]+)$/m.exec(out)?.[1]);
  if (!Number.isFinite(mbit)) throw new Error(`no measurement from ${container} to ${addr}:${port}: ${out}`);
  return mbit;
}

/** Mbit/s from `container` to a sink on the host's ADDR:PORT (started first: the sender is refused otherwise). */
export function throughput(host: DockerHost, container: string, addr: string, port: number, untilS = 6): Promise<number> {
  return sinkAndSend(['ip', 'netns', 'exec', host.name], host, container, addr, port, untilS);
}

/** Mbit/s from `container` to a sink in container `to`'s network namespace, on its address `addr`. */
export async function throughputTo(
  host: DockerHost,
  container: string,
  to: string,
  addr: string,
  port: number,
  untilS = 6,
): Promise<number> {
  const pid = await host.dockerOk(['inspect', '-f', '{{.State.Pid}}', to]);
  return sinkAndSend(['nsenter', '-t', pid, '-n'], host, container, addr, port, untilS);
}
