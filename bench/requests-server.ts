/**
 * The plugin socket's server alone, for `npm run bench -- requests` (bench/requests.ts), in a
 * process of its own so that its CPU is the server's only: the real Fastify app (buildServer)
 * over the real network driver with in-memory OVS, links and NAT (test/helpers/driver-fakes.ts),
 * ovsnet's IPAM and an embedded store, logging at info to nowhere and observing metrics as the
 * daemon does. Argument: the socket path. Answers "cpu" on its IPC channel with
 * process.cpuUsage(), "heap-start" by sampling its allocations (bench/heap-profile.ts) and
 * "heap-stop" with the bytes by frame since, "stop" by closing and exiting (so that --cpu-prof
 * writes its profile).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { NetworkDriver } from '../src/driver/network-driver.js';
import { createLogger } from '../src/lib/log.js';
import { Metrics } from '../src/metrics.js';
import { buildServer } from '../src/plugin-api/server.js';
import { SqliteStore } from '../src/store/sqlite/sqlite.js';
import { fakeSideEffects } from '../test/helpers/driver-fakes.js';
import { makeIpam } from '../test/helpers/ipam.js';
import { sampleAllocations, type Allocations } from './heap-profile.js';

const socket = process.argv[2];
if (socket === undefined) throw new Error('usage: requests-server.js SOCKET');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-bench-requests-'));
const store = new SqliteStore({ file: path.join(dir, 'state.db') });
const quiet = createLogger('silent');
const ipam = makeIpam(store, { host: 'h1' });
// The driver frees an endpoint's address through ovsnet's IPAM, as the daemon builds it.
const driver = new NetworkDriver({
  store,
  log: quiet,
  ...fakeSideEffects(),
  pools: ipam,
  host: 'h1',
  bridge: 'br0',
  datapath: () => 'netdev',
});
// The daemon's level (OVSNET_LOG_LEVEL's default): one line per call, written nowhere.
const log = createLogger('info', { write: () => undefined });
const app = buildServer({ log, ipam, driver, metrics: new Metrics() });
await app.listen({ path: socket });

let stopSampling: (() => Promise<Allocations>) | undefined;
process.on('message', (msg) => {
  if (msg === 'cpu') process.send?.(process.cpuUsage());
  if (msg === 'heap-start') void sampleAllocations().then((stop) => ((stopSampling = stop), process.send?.('sampling')));
  if (msg === 'heap-stop') void stopSampling?.().then((bytes) => process.send?.(bytes));
  if (msg === 'stop') {
    void (async () => {
      await app.close();
      await ipam.stop();
      await store.close();
      fs.rmSync(dir, { recursive: true, force: true });
      process.exit(0);
    })();
  }
});
process.send?.('ready');
