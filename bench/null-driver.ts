/**
 * The floor of any remote network driver, for the churn bench's storms: a plugin that does only
 * what Docker's remote driver protocol cannot do without. It answers every NetworkDriver call
 * on its socket with Node's own HTTP server (no framework, no store, no log) and makes one veth
 * pair per Join through ovsnet's link worker (netlink, off the main thread), deleted at Leave;
 * the addresses come from Docker's built-in IPAM, in dockerd. No bridge, no OVS, no state: a
 * container on it is reachable by nothing. Whatever a storm on it costs beyond the in-process
 * bridge is the remote protocol's own cost on this dockerd, which no remote driver can go under.
 *
 * Its event-loop delay is kept as ovsnet's is (monitorEventLoopDelay, the same 10 ms timer):
 * `GET /metrics` on its socket answers it as prom-client's nodejs_eventloop_lag_* gauges do and
 * starts a new window, so the churn bench reads what a storm does to a plugin's loop when the
 * plugin does almost nothing.
 *
 * Run by the churn bench inside the simulated host, as test/harness starts ovsnet:
 * `node null-driver.js serve`, serving OVSNET_SOCKET.
 */
import fs from 'node:fs';
import http from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Links } from '../src/driver/links/links.js';
import { LOOP_TIMER_MS } from './loop-delay.js';

const socket = process.env.OVSNET_SOCKET ?? '/run/docker/plugins/nullnet.sock';
const links = new Links();
/** A veth's host end per endpoint (kernel names are 15 bytes at most). */
const hostEnd = (endpoint: string) => `nh${endpoint.slice(0, 12)}`;
const containerEnd = (endpoint: string) => `nc${endpoint.slice(0, 12)}`;

type Body = { EndpointID?: string };
const answers: Record<string, (body: Body) => unknown> = {
  'Plugin.Activate': () => ({ Implements: ['NetworkDriver'] }),
  'NetworkDriver.GetCapabilities': () => ({ Scope: 'local', ConnectivityScope: 'local' }),
  'NetworkDriver.Join': async (body) => {
    const endpoint = body.EndpointID ?? '';
    await links.createVeth({ host: hostEnd(endpoint), container: containerEnd(endpoint), mtu: 1500 });
    return { InterfaceName: { SrcName: containerEnd(endpoint), DstPrefix: 'eth' } };
  },
  'NetworkDriver.Leave': async (body) => {
    await links.deleteLink(hostEnd(body.EndpointID ?? ''));
    return {};
  },
  'NetworkDriver.EndpointOperInfo': () => ({ Value: {} }),
};

const lag = monitorEventLoopDelay({ resolution: LOOP_TIMER_MS });
lag.enable();
/** The loop delay since the previous read, in prom-client's exposition; a new window begins. */
function lagText(): string {
  const text = [
    ['p50', lag.percentile(50)],
    ['p99', lag.percentile(99)],
    ['max', lag.max],
  ]
    .map(([name, ns]) => `nodejs_eventloop_lag_${name}_seconds ${Number(ns) / 1e9}\n`)
    .join('');
  lag.reset();
  return text;
}

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/metrics') {
    res.writeHead(200, { 'Content-Type': 'text/plain' }).end(lagText());
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const method = (req.url ?? '').slice(1);
    const body = (chunks.length === 0 ? {} : JSON.parse(Buffer.concat(chunks).toString() || '{}')) as Body;
    // Every call not named above (CreateNetwork, CreateEndpoint, DeleteEndpoint, the external
    // connectivity and discovery calls...) has nothing to do: success, no change.
    Promise.resolve((answers[method] ?? (() => ({})))(body)).then(
      (answer) => res.writeHead(200, { 'Content-Type': 'application/vnd.docker.plugins.v1+json' }).end(JSON.stringify(answer)),
      (err: unknown) => res.writeHead(200).end(JSON.stringify({ Err: err instanceof Error ? err.message : String(err) })),
    );
  });
});
fs.rmSync(socket, { force: true });
server.listen(socket);
const stop = () => {
  server.close();
  fs.rmSync(socket, { force: true });
  void links.close().then(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
