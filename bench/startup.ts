/**
 * `npm run bench -- startup`: how long `ovsnet serve` takes from its process start to answering
 * on the plugin socket (its own `startupMs`), and to the first answer a caller gets, over 10
 * starts in a row. Docker dials a managed plugin's socket 500 ms after starting it and, if nothing
 * answers, again every 3 s: a start under 500 ms saves the daemon a 3 s wait.
 *
 * Two stores: the embedded one, and etcd at an address where nothing listens (the socket must
 * answer before the store does). No Open vSwitch: the figure is ovsnet's own.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { NO_OVS, Ovsnet } from '../test/harness/host.js';
import { fmt, percentile, table } from './stats.js';

const STARTS = 10;

async function starts(store: (dir: string) => string): Promise<{ own: number[]; caller: number[] }> {
  const own: number[] = [];
  const caller: number[] = [];
  for (let i = 0; i < STARTS; i++) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-bench-start-'));
    try {
      const t0 = performance.now();
      const o = await Ovsnet.start(path.join(dir, 'ovsnet.sock'), {
        OVSNET_STORE: store(dir),
        OVSNET_STORE_TIMEOUT_MS: '500',
        OVSNET_OVSDB: NO_OVS,
        OVSNET_LOG_LEVEL: 'info',
      });
      caller.push(performance.now() - t0);
      own.push(Number(/"startupMs":(\d+)/.exec(o.log)?.[1]));
      await o.kill('SIGTERM');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
  return { own: own.sort((a, b) => a - b), caller: caller.sort((a, b) => a - b) };
}

export async function benchStartup(): Promise<void> {
  const rows: string[][] = [];
  for (const [name, store] of [
    ['embedded (sqlite)', (dir: string) => `sqlite:${dir}/state.db`],
    ['etcd, unreachable', () => 'etcd://127.0.0.1:9'],
  ] as const) {
    const { own, caller } = await starts(store);
    rows.push([
      name,
      fmt(percentile(own, 0.5), 0),
      fmt(own[own.length - 1] ?? NaN, 0),
      fmt(percentile(caller, 0.5), 0),
      fmt(caller[caller.length - 1] ?? NaN, 0),
      `${own.filter((ms) => ms < 500).length}/${own.length}`,
    ]);
  }
  console.log(`ovsnet serve, ${STARTS} starts each, one after another (the first one cold: no warm-up)`);
  console.log(
    table(
      ['store', 'listening p50 ms', 'listening max ms', 'first answer p50 ms', 'first answer max ms', "under Docker's 500 ms dial"],
      rows,
    ),
  );
}
