/**
 * The floor of ovsnet's design on ovsnet's libraries, for the builds bench (`BENCH_BUILDS=...|floor`):
 * a plugin that does, per container, only the outside work ovsnet's design asks for, at the same
 * counts, on the same packages, and nothing else: no records cache, no locks, no journal, no
 * logging, no checks, no upkeep, no flows. Where ovsnet's CPU per start stands between this and
 * the null driver (null-driver.ts, the remote protocol alone) tells its own code's cost from what
 * its design asks of Node's HTTP server, etcd3's gRPC client, OVSDB and the kernel.
 *
 * Per container, as ovsnet with etcd does it:
 * - Docker's six calls on the socket (RequestAddress, CreateEndpoint, Join,
 *   ProgramExternalConnectivity, EndpointOperInfo twice), answered by Fastify, the project's server;
 * - two store transactions per start (RequestAddress: the address reserved if no one holds it;
 *   CreateEndpoint: the endpoint's record if none exists), one per stop (DeleteEndpoint: both
 *   deleted; ReleaseAddress then writes nothing), each through etcd3; their events come back on
 *   a watch of the prefix (received and counted, not decoded: ovsnet does not decode its own);
 * - Join: one veth pair through ovsnet's link worker (netlink, off the main thread), one OVSDB
 *   transaction adding its host end to a bridge, and one OVSDB read of the port's OpenFlow number
 *   100 ms later (as Join's announcement does); Leave: the port and the pair removed.
 * Addresses come from a counter and a free list in memory: the floor keeps no other state.
 *
 * Run by the builds bench inside the simulated host, as test/harness starts ovsnet:
 * `node floor-driver.js serve`, serving OVSNET_SOCKET, storing in OVSNET_STORE (etcd://host:port).
 */
import fs from 'node:fs';
import Fastify from 'fastify';
import { Etcd3 } from 'etcd3';
import { Links } from '../src/driver/links/links.js';
import { Ovsdb } from '../src/driver/ovs/ovsdb.js';
import { formatAddress, parseAddress, parseCidr } from '../src/lib/cidr.js';

const socket = process.env.OVSNET_SOCKET ?? '/run/docker/plugins/floornet.sock';
const endpoints = (process.env.OVSNET_STORE ?? '').replace(/^etcd:\/\//, '').split(',');
const etcd = new Etcd3({ hosts: endpoints.map((e) => `http://${e}`) });
const ovsdb = new Ovsdb('unix:/var/run/openvswitch/db.sock', 5000);
const links = new Links();
const BRIDGE = 'floor0';
const PREFIX = 'floor/';

/** A veth's ends per endpoint (kernel names are 15 bytes at most). */
const hostEnd = (endpoint: string) => `fh${endpoint.slice(0, 12)}`;
const containerEnd = (endpoint: string) => `fc${endpoint.slice(0, 12)}`;

/** The pool's addresses: a counter past the gateway, and those released (offsets from the pool's base). */
let base = 0n;
let prefixLength = 24;
let next = 2n;
const free: bigint[] = [];
const dotted = (offset: bigint) => formatAddress(4, base + offset);
const addressOf: Map<string, string> = new Map();

/** What it did, for the bench to check (GET /counts): store transactions, watch events, OVSDB requests. */
const counts = { transactions: 0, watched: 0, ovsdb: 0 };
/** An etcd transaction, counted. */
async function txn(t: { commit(): Promise<{ succeeded: boolean }> }): Promise<boolean> {
  counts.transactions++;
  return (await t.commit()).succeeded;
}
/** An OVSDB request (`requests`: how many round trips it makes), counted. */
function ovs<T>(requests: number, p: Promise<T>): Promise<T> {
  counts.ovsdb += requests;
  return p;
}

void etcd
  .watch()
  .prefix(PREFIX)
  .create()
  .then((w) =>
    w.on('data', (res) => {
      counts.watched += res.events.length;
    }),
  );

type Body = Record<string, unknown>;
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

const answers: Record<string, (body: Body) => unknown> = {
  'Plugin.Activate': () => ({ Implements: ['NetworkDriver', 'IpamDriver'] }),
  'IpamDriver.GetCapabilities': () => ({ RequiresMACAddress: false }),
  'IpamDriver.GetDefaultAddressSpaces': () => ({ LocalDefaultAddressSpace: 'floor', GlobalDefaultAddressSpace: 'floorg' }),
  'IpamDriver.RequestPool': (body) => {
    const pool = parseCidr(str(body.Pool));
    base = pool.base;
    prefixLength = pool.bits;
    return { PoolID: str(body.Pool), Pool: str(body.Pool), Data: {} };
  },
  'IpamDriver.RequestAddress': async (body) => {
    const options = (body.Options ?? {}) as Record<string, string>;
    if (options.RequestAddressType === 'com.docker.network.gateway') return { Address: `${dotted(1n)}/${prefixLength}`, Data: {} };
    const n = free.pop() ?? next++;
    const address = dotted(n);
    const key = `${PREFIX}a/${address}`;
    if (!(await txn(etcd.if(key, 'Create', '==', 0).then(etcd.put(key).value('reserved'))))) throw new Error(`${address} is taken`);
    return { Address: `${address}/${prefixLength}`, Data: {} };
  },
  'IpamDriver.ReleaseAddress': (body) => {
    const offset = parseAddress(str(body.Address)).value - base;
    if (offset > 1n) free.push(offset);
    return {};
  },
  'IpamDriver.ReleasePool': () => ({}),
  'NetworkDriver.GetCapabilities': () => ({ Scope: 'local', ConnectivityScope: 'local' }),
  'NetworkDriver.CreateNetwork': async () => {
    await ovsdb.ensureBridge(BRIDGE, 'netdev', 'standalone');
    return {};
  },
  'NetworkDriver.CreateEndpoint': async (body) => {
    const id = str(body.EndpointID);
    const address = str((body.Interface as Body | undefined)?.Address).split('/')[0] ?? '';
    addressOf.set(id, address);
    const key = `${PREFIX}e/${id}`;
    const record = JSON.stringify({ id, network: str(body.NetworkID), address, options: body.Options ?? {} });
    if (!(await txn(etcd.if(key, 'Create', '==', 0).then(etcd.put(key).value(record))))) throw new Error(`endpoint ${id} exists`);
    return { Interface: {} };
  },
  'NetworkDriver.Join': async (body) => {
    const id = str(body.EndpointID);
    await links.createVeth({ host: hostEnd(id), container: containerEnd(id), mtu: 1500 });
    await ovs(1, ovsdb.addPort(BRIDGE, hostEnd(id), { tag: 0, externalIds: { 'floor-endpoint': id } }));
    setTimeout(() => void ovs(1, ovsdb.ofports([hostEnd(id)])).catch(() => undefined), 100);
    return { InterfaceName: { SrcName: containerEnd(id), DstPrefix: 'eth' }, Gateway: dotted(1n) };
  },
  'NetworkDriver.Leave': async (body) => {
    const id = str(body.EndpointID);
    await ovs(2, ovsdb.deletePort(hostEnd(id)));
    await links.deleteLink(hostEnd(id));
    return {};
  },
  'NetworkDriver.DeleteEndpoint': async (body) => {
    const id = str(body.EndpointID);
    const address = addressOf.get(id) ?? '';
    addressOf.delete(id);
    await txn(
      etcd.if(`${PREFIX}e/${id}`, 'Create', '>', 0).then(etcd.delete().key(`${PREFIX}e/${id}`), etcd.delete().key(`${PREFIX}a/${address}`)),
    );
    return {};
  },
  'NetworkDriver.EndpointOperInfo': () => ({ Value: {} }),
};

const app = Fastify({ logger: false });
app.removeAllContentTypeParsers();
app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => {
  try {
    done(null, body === '' ? {} : JSON.parse(body as string));
  } catch (err) {
    done(err as Error, undefined);
  }
});
app.post('/*', async (req, reply) => {
  const method = req.url.slice(1);
  // Every call not named above (DeleteNetwork, RevokeExternalConnectivity, the discovery calls...) has nothing to do.
  const answer = answers[method] ?? (() => ({}));
  try {
    const out = await answer((req.body ?? {}) as Body);
    return await reply.type('application/vnd.docker.plugins.v1+json').send(out);
  } catch (err) {
    return await reply.send({ Err: err instanceof Error ? err.message : String(err) });
  }
});
app.get('/counts', () => counts);

fs.rmSync(socket, { force: true });
await app.listen({ path: socket });
const stop = () => {
  void app
    .close()
    .then(() => links.close())
    .then(() => {
      ovsdb.close();
      etcd.close();
      fs.rmSync(socket, { force: true });
      process.exit(0);
    });
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
