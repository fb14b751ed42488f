/**
 * The fuzz suite: 3,000 generated requests (test/e2e/fuzz-arbs.ts) on every route of the
 * plugin socket, against `ovsnet serve` with the embedded store and a real Open vSwitch inside a
 * simulated host. Properties: the daemon stays up; every non-200 answer is JSON with a string
 * `Err` of bounded length; a refused request changes no store key (checked after every request)
 * and no OVS port, link or iptables rule (sampled every WINDOW requests and after every accepted
 * request, so a change seen at a sample comes from refused requests only).
 *
 * FUZZ_SEED=<n> replays a run; FUZZ_RUNS=<n> changes its length (3,000 by default). Every run
 * draws a new seed, so the requests tried add up over runs. A run's time goes mostly to accepted
 * changes (each sampled, undone and sampled again, or the baseline built anew), not to refused
 * requests (5 ms each): 6,000 requests with seed 12345 alone on the 2-core CI machine took 177 s
 * (753 accepted, 1,727 samples taking 52 s); beside the heavy end-to-end files of the test command
 * 2-3 times that, 491-521 s in CI 42-44, near tap's bound per file (600 s) and a quarter of a lane:
 * so 3,000 by default. Its closing line says where the time went.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import http from 'node:http';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import t from 'tap';
import { BODY_LIMIT } from '../../src/plugin-api/server.js';
import { keys as keyPrefixes } from '../../src/store/keys.js';
import { DockerHost, type Ovsnet } from '../harness/host.js';
import { request, type Baseline, type Req } from './fuzz-arbs.js';

const SEED = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31);
const RUNS = Number(process.env.FUZZ_RUNS ?? 3_000);
const BATCH = 250;
/** Requests between two samples of OVS ports, links and iptables rules. */
const WINDOW = 250;
/** Longest `Err` accepted: the server cuts at 1024 characters plus its marker. */
const MAX_ERR = 1100;

const host = await DockerHost.up('fuzz');
let ovsnet: Ovsnet | undefined;
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
t.teardown(async () => {
  agent.destroy();
  shell?.stdin.end();
  store?.close();
  if (ovsnet !== undefined) await ovsnet.kill('SIGTERM');
  await host.down();
});

interface Answer {
  status: number;
  text: string;
}

function send(route: string, body: string | undefined): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: ovsnet?.socket, path: `/${route}`, method: 'POST', agent, timeout: 20_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (d: Buffer) => chunks.push(d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error(`${route} timed out`)));
    req.end(body ?? '');
  });
}

async function call(route: string, body: unknown): Promise<Record<string, unknown>> {
  const a = await send(route, JSON.stringify(body));
  if (a.status !== 200) throw new Error(`${route} ${JSON.stringify(body)}: ${a.status} ${a.text}`);
  return JSON.parse(a.text) as Record<string, unknown>;
}

/** A shell inside the host, kept open: a sample costs its four programs, not a host entry. */
let shell: ChildProcessWithoutNullStreams | undefined;
let shellOut = '';
const END = '__fuzz_sample_end__';
const PART = '__fuzz_sample_part__';
// Programs only (a process costs ~4 ms on the CI machines here): the text is tidied here. Run at
// once, each into a file, they took longer (72 s against 52 s in one run): the files' four cats.
const SAMPLE = `ovs-vsctl --format=csv --columns=name,external_ids list Interface; echo ${PART};
  ip -o link; echo ${PART}; iptables-save; echo ${PART}; ip6tables-save; echo ${END}`.replace(/\n/g, ' ');

const sorted = (lines: string[]) => lines.sort().join('\n');
/** Counters and comments of a rules dump dropped: they change without any request. */
const rules = (text: string) =>
  text
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .map((l) => l.replace(/\[\d+:\d+\]/, ''))
    .join('\n');
/**
 * Link numbers, and the flags and qdisc that ovs-vswitchd sets in its own time (promiscuous mode,
 * carrier), dropped: they settle after a request has been answered.
 */
const links = (text: string) =>
  sorted(
    text.split('\n').map((l) =>
      l
        .replace(/^\d+: /, '')
        .replace(/ state [A-Z]+/, '')
        .replace(/qlen \d+/, '')
        .replace(/ qdisc [a-z_]+/, '')
        .replace(/(PROMISC|NO-CARRIER|LOWER_UP|M-DOWN),?/g, ''),
    ),
  );

/** Where the run's time went, for its closing line. */
const spent = { sample: 0, samples: 0, keys: 0, undo: 0 };
/** What an accepted request may change: OVS interfaces, links and (ip6)tables rules of the host. */
async function sample(): Promise<string> {
  const t0 = performance.now();
  try {
    return await sampleOnce();
  } finally {
    spent.sample += performance.now() - t0;
    spent.samples++;
  }
}
function sampleOnce(): Promise<string> {
  if (shell === undefined) {
    shell = spawn('nsenter', [`--net=/run/netns/${host.name}`, `--mount=${host.dir}/mntns`, `--uts=${host.dir}/utsns`, '--', 'sh']);
    shell.stdout.on('data', (d: Buffer) => (shellOut += d.toString()));
  }
  const sh = shell;
  return new Promise((resolve, reject) => {
    shellOut = '';
    const timer = setTimeout(() => reject(new Error('sampling the host timed out')), 30_000);
    const poll = () => {
      const at = shellOut.indexOf(END);
      if (at < 0) {
        sh.stdout.once('data', () => setImmediate(poll));
        return;
      }
      clearTimeout(timer);
      const [ports = '', linkList = '', v4 = '', v6 = ''] = shellOut.slice(0, at).split(`${PART}\n`);
      resolve([sorted(ports.split('\n')), links(linkList), rules(v4), rules(v6)].join('\n---\n'));
    };
    sh.stdin.write(`${SAMPLE}\n`);
    poll();
  });
}

const db = () => new Database(host.storeFile, { readonly: true, fileMustExist: true });
let store: Database.Database | undefined;
/** Every store key with its value and mod revision. */
function keys(): string {
  const t0 = performance.now();
  store ??= db();
  // Tombstones (ipam-driver/state/tombstones.ts) are left out: a consumed one is deleted by a
  // sweep of its own a second after the release that consumed it, whatever request is in flight
  // then. They only ever make a release free nothing; what is held is in the reservations here.
  const rows = store
    .prepare(`SELECT key, value, mod_rev FROM kv WHERE key NOT LIKE '${keyPrefixes.allTombstones}%' ORDER BY key`)
    .all() as {
    key: Buffer | string;
    value: Buffer | string;
    mod_rev: number;
  }[];
  const out = rows.map((r) => `${r.key.toString()} @${r.mod_rev} ${r.value.toString()}`).join('\n');
  spent.keys += performance.now() - t0;
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const POOL = '10.199.7.0/24';
let base: Baseline;
/** Times a gateway link was still there after its DeleteNetwork answered. */
let lingered = 0;

const networkRequest = (b: Baseline) => ({
  NetworkID: b.networkId,
  Options: { 'com.docker.network.enable_ipv6': false, 'com.docker.network.generic': {} },
  IPv4Data: [{ AddressSpace: b.space, Pool: b.pool, Gateway: b.gateway, AuxAddresses: {} }],
  IPv6Data: [],
});

/** Builds the valid state: a pool with its gateway, a network, an endpoint joined, its ports published. */
async function buildBaseline(): Promise<Baseline> {
  const space = String((await call('IpamDriver.GetDefaultAddressSpaces', {})).LocalDefaultAddressSpace);
  const poolReq = { AddressSpace: space, Pool: POOL, SubPool: '', Options: {}, V6: false };
  // A deleted network's gateway link may outlive DeleteNetwork briefly (reported as a finding).
  let pool: Record<string, unknown> | undefined;
  for (let i = 0; pool === undefined; i++) {
    try {
      pool = await call('IpamDriver.RequestPool', poolReq);
    } catch (err) {
      if (i >= 50 || !String(err).includes('connected route')) throw err;
      lingered++;
      await sleep(100);
    }
  }
  const poolId = String(pool.PoolID);
  const gw = await call('IpamDriver.RequestAddress', {
    PoolID: poolId,
    Address: '',
    Options: { RequestAddressType: 'com.docker.network.gateway' },
  });
  const addr = await call('IpamDriver.RequestAddress', { PoolID: poolId, Address: '', Options: {} });
  const b: Baseline = {
    space,
    poolId,
    pool: POOL,
    gateway: String(gw.Address),
    address: String(addr.Address),
    networkId: 'c0ffee'.padEnd(64, '1'),
    endpointId: 'e0e0e0'.padEnd(64, '2'),
  };
  const ids = { NetworkID: b.networkId, EndpointID: b.endpointId };
  await call('NetworkDriver.CreateNetwork', networkRequest(b));
  await call('NetworkDriver.CreateEndpoint', { ...ids, Interface: { Address: b.address, AddressIPv6: '', MacAddress: '' }, Options: {} });
  await call('NetworkDriver.Join', { ...ids, SandboxKey: '/var/run/docker/netns/0123456789ab', Options: {} });
  return b;
}

/** Puts back the baseline's parts a request removed; false if one of them cannot be. */
async function restore(b: Baseline): Promise<boolean> {
  const ids = { NetworkID: b.networkId, EndpointID: b.endpointId };
  for (const [address, options] of [
    [b.gateway, { RequestAddressType: 'com.docker.network.gateway' }],
    [b.address, {}],
  ] as const) {
    // Refused when still allocated: that is the answer wanted.
    await send('IpamDriver.RequestAddress', JSON.stringify({ PoolID: b.poolId, Address: address.split('/')[0], Options: options }));
  }
  for (const [route, body] of [
    ['NetworkDriver.CreateNetwork', networkRequest(b)],
    ['NetworkDriver.CreateEndpoint', { ...ids, Interface: { Address: b.address, AddressIPv6: '', MacAddress: '' }, Options: {} }],
    ['NetworkDriver.Join', { ...ids, SandboxKey: '/var/run/docker/netns/0123456789ab', Options: {} }],
  ] as const) {
    if ((await send(route, JSON.stringify(body))).status !== 200) return false;
  }
  return true;
}

/** Undoes everything: the baseline and whatever an accepted request added to it. Errors are fine (already gone). */
async function tearDown(b: Baseline, extra: readonly [string, unknown][]): Promise<string[]> {
  const ids = { NetworkID: b.networkId, EndpointID: b.endpointId };
  const steps: [string, unknown][] = [
    ...extra,
    ['NetworkDriver.RevokeExternalConnectivity', ids],
    ['NetworkDriver.Leave', ids],
    ['NetworkDriver.DeleteEndpoint', ids],
    ['NetworkDriver.DeleteNetwork', { NetworkID: b.networkId }],
    ['IpamDriver.ReleaseAddress', { PoolID: b.poolId, Address: b.address }],
    ['IpamDriver.ReleaseAddress', { PoolID: b.poolId, Address: b.gateway }],
    ['IpamDriver.ReleasePool', { PoolID: b.poolId }],
  ];
  const answers: string[] = [];
  for (const [route, body] of steps) {
    const a = await send(route, JSON.stringify(body));
    answers.push(`${route} ${JSON.stringify(body).slice(0, 200)} -> ${a.status} ${a.text.slice(0, 300)}`);
  }
  return answers;
}

/** What to undo after an accepted request, beyond the baseline itself. */
function undoOf(req: Req, answer: Record<string, unknown>): [string, unknown][] {
  let body: Record<string, unknown> = {};
  try {
    const parsed = JSON.parse(req.body ?? '{}') as unknown;
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) body = parsed as Record<string, unknown>;
  } catch {
    return [];
  }
  const ids = { NetworkID: body.NetworkID, EndpointID: body.EndpointID };
  switch (req.route) {
    case 'IpamDriver.RequestPool':
      return [['IpamDriver.ReleasePool', { PoolID: answer.PoolID }]];
    case 'IpamDriver.RequestAddress':
      return [['IpamDriver.ReleaseAddress', { PoolID: body.PoolID, Address: answer.Address }]];
    case 'NetworkDriver.CreateNetwork':
      return [['NetworkDriver.DeleteNetwork', { NetworkID: body.NetworkID }]];
    case 'NetworkDriver.CreateEndpoint':
      return [['NetworkDriver.DeleteEndpoint', ids]];
    case 'NetworkDriver.Join':
      return [['NetworkDriver.Leave', ids]];
    case 'NetworkDriver.ProgramExternalConnectivity':
      return [['NetworkDriver.RevokeExternalConnectivity', ids]];
    default:
      return [];
  }
}

/** Routes that change nothing even when they succeed. */
const READ_ONLY = new Set([
  'NetworkDriver.GetCapabilities',
  'NetworkDriver.GwAllocCheck',
  'NetworkDriver.EndpointOperInfo',
  'NetworkDriver.AllocateNetwork',
  'NetworkDriver.FreeNetwork',
  'NetworkDriver.DiscoverNew',
  'NetworkDriver.DiscoverDelete',
  'IpamDriver.GetCapabilities',
  'IpamDriver.GetDefaultAddressSpaces',
]);

t.test(`fuzz: ${RUNS} requests over every route, seed ${SEED}`, async (t) => {
  // The fuzz's endpoints have no container: their container ends stay on the host, which the
  // reaper (ipam-driver/recovery/orphan-reaper.ts, daemon/reaper.ts) rightly takes for containers gone after two
  // grace periods and removes, a change no request made. Out of the way for the run.
  ovsnet = await host.startOvsnet({ OVSNET_REAP_GRACE: '86400' });
  base = await buildBaseline();
  // Plugin.Activate's reconcile runs in the background: let it settle before the first sample.
  await sleep(500);
  let lastKeys = keys();
  let lastSample = await sample();
  const counts = new Map<string, Map<number, number>>();
  /** Time spent waiting for answers, per route. */
  const routeMs = new Map<string, number>();
  let accepted = 0;
  let resets = 0;
  /** Refused requests whose effect on OVS, links and rules could not be told apart from an accepted one's. */
  let unchecked = 0;
  /** Kinds of request seen accepted: the host is sampled before the next one of these. */
  const acceptedKinds = new Set<string>();
  /** Requests since the last sample, all refused. */
  let window: string[] = [];
  const failures: string[] = [];
  const fail = (msg: string) => {
    failures.push(msg);
    if (failures.length >= 5) throw new Error(failures.join('\n\n'));
  };
  const checkSample = async (why: string) => {
    const now = await sample();
    if (now !== lastSample) {
      fail(
        `OVS ports, links or iptables rules changed ${why}, after only refused requests:\n${diff(lastSample, now)}\nrequests:\n${window.slice(-20).join('\n')}`,
      );
    }
    lastSample = now;
    window = [];
  };
  const started = Date.now();
  console.log(`# fuzz seed ${SEED} (replay: FUZZ_SEED=${SEED}), ${RUNS} requests`);
  for (let done = 0, batch = 0; done < RUNS; batch++) {
    const reqs = fc.sample(request(base), { seed: SEED + batch, numRuns: Math.min(BATCH, RUNS - done) });
    for (const req of reqs) {
      done++;
      const line = `#${done} ${req.route} [${req.how}]`;
      if (acceptedKinds.has(req.kind) && window.length > 0) await checkSample(`before ${line}, which may be accepted`);
      let a: Answer;
      const sent = performance.now();
      try {
        a = await send(req.route, req.body);
      } catch (err) {
        // A body over the limit may be refused by closing the connection while it is still sent.
        const over = Buffer.byteLength(req.body ?? '') > BODY_LIMIT;
        if (over && /EPIPE|ECONNRESET/.test(String(err)) && ovsnet.child.exitCode === null) {
          a = { status: 413, text: '{"Err":"(connection closed on a body over the limit)"}' };
        } else {
          fail(
            `${line}: no answer (${String(err)}); daemon ${ovsnet.child.exitCode === null ? 'alive' : `exited ${ovsnet.child.exitCode}`}`,
          );
          if (ovsnet.child.exitCode !== null) throw new Error(failures.join('\n\n') + `\n${ovsnet.log.slice(-3000)}`);
          continue;
        }
      }
      const label = req.kind === 'unknown' ? '(unknown routes)' : req.route;
      const perRoute = counts.get(label) ?? new Map<number, number>();
      counts.set(label, perRoute);
      perRoute.set(a.status, (perRoute.get(a.status) ?? 0) + 1);
      routeMs.set(label, (routeMs.get(label) ?? 0) + performance.now() - sent);
      const k = keys();
      if (a.status !== 200) {
        let err: unknown;
        try {
          err = (JSON.parse(a.text) as { Err?: unknown }).Err;
        } catch {
          err = undefined;
        }
        if (typeof err !== 'string' || err === '' || err.length > MAX_ERR)
          fail(`${line}: ${a.status} without a bounded string Err: ${a.text.slice(0, 300)}`);
        if (k !== lastKeys) fail(`${line}: refused (${a.status} ${a.text.slice(0, 200)}) yet the store changed:\n${diff(lastKeys, k)}`);
        window.push(`${line} -> ${a.status}`);
      } else if (!READ_ONLY.has(req.route) && req.route.match(/^(NetworkDriver|IpamDriver|Plugin)\./)) {
        // Accepted: it may change things. If it changed nothing, the window holds no change.
        accepted++;
        let answer: Record<string, unknown> = {};
        try {
          answer = JSON.parse(a.text) as Record<string, unknown>;
        } catch {
          fail(`${line}: 200 with a body that is not JSON: ${a.text.slice(0, 200)}`);
        }
        if (req.route === 'Plugin.Activate') await sleep(100); // its reconcile, in the background
        const now = await sample();
        if (now === lastSample && keys() === lastKeys) {
          window = [];
          continue;
        }
        // It changed things, so the refused requests since the last sample go unchecked
        // (rare: the next request of its kind is sampled before). Undo it, or rebuild the baseline.
        acceptedKinds.add(req.kind);
        unchecked += window.length;
        window = [];
        const undoStart = performance.now();
        const undo = undoOf(req, answer);
        for (const [route, body] of undo) await send(route, JSON.stringify(body));
        // Put back what it removed (each step is a no-op where nothing was removed).
        if (req.route !== 'IpamDriver.ReleasePool' && (await restore(base))) {
          lastKeys = keys();
          lastSample = await sample();
          spent.undo += performance.now() - undoStart;
          continue;
        }
        resets++;
        const undone = await tearDown(base, undo);
        try {
          base = await buildBaseline();
        } catch (err) {
          throw new Error(
            `after ${line} (accepted: ${a.text.slice(0, 200)}), the baseline could not be rebuilt: ${String(err)}\nteardown:\n${undone.join('\n')}\nrequest body: ${req.body?.slice(0, 500)}`,
          );
        }
        lastKeys = keys();
        lastSample = await sample();
        continue;
      } else if (k !== lastKeys) {
        fail(`${line}: a read-only route (${a.status}) changed the store:\n${diff(lastKeys, k)}`);
      }
      lastKeys = k;
      if (window.length >= WINDOW) await checkSample(`in the last ${WINDOW} requests`);
    }
  }
  await checkSample('at the end');
  const caps = await send('NetworkDriver.GetCapabilities', '{}');
  t.equal(caps.status, 200, 'the daemon still answers');
  t.equal(ovsnet.child.exitCode, null, 'the daemon is alive');
  const secs = ((Date.now() - started) / 1000).toFixed(1);
  const table = [...counts]
    .sort()
    .map(([r, m]) => `#   ${r}: ${[...m].map(([s, n]) => `${s}x${n}`).join(' ')} in ${((routeMs.get(r) ?? 0) / 1000).toFixed(1)} s`);
  console.log(
    `# fuzz: ${RUNS} requests in ${secs} s (${spent.samples} host samples ${(spent.sample / 1000).toFixed(1)} s, store reads ${(spent.keys / 1000).toFixed(1)} s, undo+restore ${(spent.undo / 1000).toFixed(1)} s), ${accepted} accepted changes (${resets} baseline resets), ${unchecked} refused requests not sampled apart, gateway link outlived DeleteNetwork ${lingered}x 100 ms, seed ${SEED}\n${table.join('\n')}`,
  );
  t.same(failures, [], `no property broken (seed ${SEED})`);
});

/** The lines of `b` not in `a` (+) and of `a` not in `b` (-), for a failure's message. */
function diff(a: string, b: string): string {
  const as = new Set(a.split('\n'));
  const bs = new Set(b.split('\n'));
  const out = [...[...as].filter((l) => !bs.has(l)).map((l) => `- ${l}`), ...[...bs].filter((l) => !as.has(l)).map((l) => `+ ${l}`)];
  return out.map((l) => l.slice(0, 300)).join('\n');
}
