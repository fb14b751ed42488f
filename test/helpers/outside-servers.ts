/**
 * Servers and a client in a network namespace of a test's ("the outside" of a simulated host),
 * run as this file under node through nsenter:
 *
 *   serve SPEC...   SPEC is tcp,ADDR,PORT,REPLY (answers REPLY to every connection) or dns,ADDR
 *                   (UDP 53: every A query answered 203.0.113.7, others empty); prints "ready"
 *                   once all listen, then "dns ADDR NAME" per query
 *   connect ADDR PORT [LOCAL]   prints what the server sent; exit 1 if nothing within 3 s
 *
 * The test starts `serve` with startOutside() and stops it by its process (never by name).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { run } from '../harness/host.js';

const SELF = fileURLToPath(import.meta.url);
export const DNS_ANSWER = '203.0.113.7';

/** A DNS answer to `query`: the question echoed, an A record for A queries. */
function answer(query: Buffer): Buffer | undefined {
  if (query.length < 17) return undefined;
  let end = 12;
  while (end < query.length && query[end] !== 0) end += (query[end] ?? 0) + 1;
  const question = query.subarray(12, end + 5);
  const type = query.readUInt16BE(end + 1);
  const header = Buffer.alloc(12);
  query.copy(header, 0, 0, 2);
  header.writeUInt16BE(0x8180, 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(type === 1 ? 1 : 0, 6);
  const record = Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, ...DNS_ANSWER.split('.').map(Number)]);
  return Buffer.concat([header, question, ...(type === 1 ? [record] : [])]);
}

function nameOf(query: Buffer): string {
  const labels: string[] = [];
  for (let i = 12; i < query.length && query[i] !== 0; i += (query[i] ?? 0) + 1)
    labels.push(query.subarray(i + 1, i + 1 + (query[i] ?? 0)).toString());
  return labels.join('.');
}

async function serve(specs: readonly string[]): Promise<void> {
  for (const spec of specs) {
    const [kind, addr = '', port = '', reply = ''] = spec.split(',');
    if (kind === 'tcp') {
      const server = net.createServer((s) => s.end(`${reply}\n`));
      await new Promise<void>((resolve) => server.listen(Number(port), addr, resolve));
    } else {
      const socket = dgram.createSocket('udp4');
      socket.on('message', (query, from) => {
        console.log(`dns ${addr} ${nameOf(query)}`);
        const a = answer(query);
        if (a !== undefined) socket.send(a, from.port, from.address);
      });
      await new Promise<void>((resolve) => socket.bind(53, addr, resolve));
    }
  }
  console.log('ready');
}

function connect(addr: string, port: number, local?: string): void {
  let got = '';
  const s = net.connect({ host: addr, port, ...(local === undefined ? {} : { localAddress: local }) });
  const timer = setTimeout(() => s.destroy(), 3000);
  s.on('data', (d: Buffer) => (got += d.toString()));
  s.on('error', () => undefined);
  s.on('close', () => {
    clearTimeout(timer);
    process.stdout.write(got);
    process.exit(got === '' ? 1 : 0);
  });
}

if (process.argv[1] === SELF) {
  const [command, ...args] = process.argv.slice(2);
  if (command === 'serve') await serve(args);
  else connect(args[0] ?? '', Number(args[1]), args[2]);
}

const enter = (ns: string) => ['nsenter', `--net=/run/netns/${ns}`, '--', process.execPath, SELF];

/** Starts `serve` in namespace `ns`; resolves once everything listens. `lines`: what it printed since. */
export async function startOutside(ns: string, specs: readonly string[]): Promise<{ lines: string[]; stop: () => void }> {
  const [cmd = '', ...args] = enter(ns);
  const child: ChildProcess = spawn(cmd, [...args, 'serve', ...specs], { stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let err = '';
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (d: Buffer) => {
      lines.push(
        ...d
          .toString()
          .split('\n')
          .filter((l) => l !== ''),
      );
      if (lines.includes('ready')) resolve();
    });
    child.on('exit', (code) => reject(new Error(`outside servers exited (${code}): ${err}`)));
  });
  return { lines, stop: () => void child.kill('SIGTERM') };
}

/** A TCP connection from namespace `ns` (from `local`, if given): what the server said, '' when none. */
export async function connectFrom(ns: string, addr: string, port: number, local?: string): Promise<string> {
  const [cmd = '', ...args] = enter(ns);
  const r = await run(cmd, [...args, 'connect', addr, String(port), ...(local === undefined ? [] : [local])], { timeoutMs: 10_000 });
  return r.code === 0 ? r.stdout.trim() : '';
}
