/**
 * The metrics listener, which any local user can reach, holds against idle connections: 1,100
 * of them leave the daemon (run with Docker's usual 1024 descriptors) answering Docker on the
 * plugin socket, and a silent connection is closed after the idle timeout.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { METRICS_LIMITS, Metrics } from '../../src/metrics.js';
import { createLogger } from '../../src/lib/log.js';
import { NO_OVS, Ovsnet, pluginCall } from '../harness/host.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-limits-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const { port } = s.address() as net.AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

/** Resolves with the socket once connected, or undefined when refused or closed first. */
const connect = (port: number) =>
  new Promise<net.Socket | undefined>((resolve) => {
    const c = net.connect(port, '127.0.0.1');
    c.once('connect', () => resolve(c));
    c.once('error', () => resolve(undefined));
  });

const within = <T>(p: Promise<T>, ms: number, what: string) =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms))]);

t.test('1,100 idle connections to the metrics port: the plugin socket still answers', async (t) => {
  const socket = path.join(dir, 'plugins', 'ovsnet.sock');
  const port = await freePort();
  const o = await Ovsnet.start(
    socket,
    { OVSNET_STORE: `sqlite:${path.join(dir, 'state.db')}`, OVSNET_OVSDB: NO_OVS, OVSNET_METRICS_ADDR: `127.0.0.1:${port}` },
    // 1024 descriptors, as many service managers give a process.
    ['prlimit', '--nofile=1024:1024', '--'],
  );
  t.teardown(() => o.kill('SIGKILL'));
  // The daemon stopped while they connect, as a busy one would be: the accept queue (the listen
  // backlog, 511) overflows, the rest are completed by the kernel later, some of them with SYN
  // cookies into a queue still full: open on this side, never handed to the daemon.
  const pid = o.child.pid ?? 0;
  process.kill(pid, 'SIGSTOP');
  const connecting = Promise.all(Array.from({ length: 1100 }, () => connect(port)));
  await new Promise((r) => setTimeout(r, 500));
  process.kill(pid, 'SIGCONT');
  const conns = (await connecting).filter((c) => c !== undefined);
  t.teardown(() => conns.forEach((c) => c.destroy()));
  // Let the daemon accept (and close what is over its cap).
  await new Promise((r) => setTimeout(r, 500));
  // Docker's calls in a burst, each on a connection of its own (a container storm).
  const calls = await within(
    Promise.all(
      Array.from({ length: 20 }, () =>
        pluginCall(socket, 'IpamDriver.GetCapabilities').then(
          (r) => r.status,
          () => 0,
        ),
      ),
    ),
    10_000,
    'the plugin socket',
  );
  t.same(
    calls,
    Array.from({ length: 20 }, () => 200),
    'the plugin socket answers every call',
  );
  const fds = fs.readdirSync(`/proc/${pid}/fd`).length;
  t.ok(fds < 300, `the daemon holds ${fds} descriptors, not one per connection`);
  // Connections past the cap are closed as the daemon accepts them: counted on its side (held, or
  // waiting in the accept queue), within 10 s, a limit on correctness, not a target.
  const onDaemonSide = () =>
    execFileSync('ss', ['-Htn', 'state', 'established', `( sport = :${port} )`], { encoding: 'utf8' })
      .split('\n')
      .filter((line) => line.trim() !== '').length;
  const openConns = () => conns.filter((c) => !c.destroyed && c.readyState === 'open');
  const openHere = () => openConns().length;
  const settle = async (count: () => number) => {
    const since = Date.now();
    let n = count();
    while (n > METRICS_LIMITS.maxConnections + 5 && Date.now() - since < 10_000) {
      await new Promise((r) => setTimeout(r, 100));
      n = count();
    }
    return { n, after: `${Date.now() - since} ms after` };
  };
  const held = await settle(onDaemonSide);
  t.ok(
    held.n <= METRICS_LIMITS.maxConnections + 5,
    `the daemon's side holds ${held.n} of 1,100 connections (cap ${METRICS_LIMITS.maxConnections}), ${held.after}`,
  );
  // This side hears every close. What the kernel completed but never handed over (CI 42 saw 140
  // open here 10 s after) stays open here until it sends: one byte of a request, which the daemon
  // would hold as a request begun, gets those reset.
  const before = openHere();
  openConns().forEach((c) => c.write('G'));
  const here = await settle(openHere);
  t.ok(here.n <= METRICS_LIMITS.maxConnections + 5, `${here.n} open on this side (${before} before a byte was sent), ${here.after}`);
});

t.test('an idle connection to the metrics port is closed after the idle timeout; a scrape still works', async (t) => {
  const metrics = new Metrics();
  const server = await metrics.listen('127.0.0.1', 0, createLogger('silent'), { idleTimeoutMs: 300 });
  if (server === undefined) throw new Error('metrics did not listen');
  t.teardown(() => new Promise((r) => server.close(r)));
  const { port } = server.address() as net.AddressInfo;
  const idle = await connect(port);
  if (idle === undefined) throw new Error('not connected');
  const started = Date.now();
  await within(new Promise((r) => idle.once('close', r)), 5000, 'the idle connection');
  t.ok(Date.now() - started < 3000, `closed after ${Date.now() - started} ms`);
  const scrape = await fetch(`http://127.0.0.1:${port}/metrics`);
  t.equal(scrape.status, 200);
  t.match(await scrape.text(), /ovsnet_/);
});
