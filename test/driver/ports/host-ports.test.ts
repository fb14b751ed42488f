/**
 * Host ports held as real sockets on loopback: a port a process holds is refused with the reason,
 * a range yields its first free port, what reaches the socket is relayed to the "container" (a
 * server on another loopback port) for TCP and UDP, and release frees the port.
 */
import dgram from 'node:dgram';
import net from 'node:net';
import t from 'tap';
import { HostPorts, dynamicRange } from '../../../src/driver/ports/host-ports.js';
import { RELAY_MAX_CONNECTIONS, listenTcp } from '../../../src/driver/ports/loopback-proxy.js';
import { createLogger } from '../../../src/lib/log.js';
import type { PortBinding } from '../../../src/driver/model/records.js';

const LO = '127.0.0.1';
const EP = 'e'.repeat(64);
const OTHER = 'f'.repeat(64);
const log = createLogger('silent');

/** A TCP server on loopback (a host process, or the "container"); answers `text` and closes. */
async function tcpServer(text: string, port = 0, host = LO): Promise<net.Server & { port: number }> {
  const s = net.createServer((c) => c.on('error', () => undefined).end(text));
  await new Promise<void>((r) => s.listen(port, host, r));
  t.teardown(() => new Promise<void>((r) => s.close(() => r())));
  return Object.assign(s, { port: (s.address() as net.AddressInfo).port });
}

/** A free TCP port of loopback (free when checked). */
async function freePort(): Promise<number> {
  const s = await tcpServer('');
  const p = s.port;
  await new Promise<void>((r) => s.close(() => r()));
  return p;
}

function fetchText(port: number, host = LO): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = '';
    net
      .connect(port, host)
      .on('data', (d: Buffer) => (got += d.toString()))
      .on('end', () => resolve(got))
      .on('error', reject);
  });
}

const bind = (b: Partial<PortBinding>): PortBinding => ({ proto: 'tcp', containerPort: 80, hostIp: LO, hostPort: 0, hostPortEnd: 0, ...b });

t.test('a port a host process holds is refused with the reason; a range takes its first free port', async (t) => {
  const ports = new HostPorts(log);
  t.teardown(() => ports.release(EP));
  const held = await tcpServer('host service');
  await t.rejects(ports.claim({ endpointId: EP, address: LO }, [bind({ hostPort: held.port, hostPortEnd: held.port })]), {
    code: 'PORT_IN_USE',
    message: `host tcp port ${held.port} on ${LO} is in use by a process of this host: publish another port (-p OTHER:80), a range (-p ${held.port}-${held.port + 10}:80) or any free one (-p 80)`,
  });
  const got = await ports.claim({ endpointId: EP, address: LO }, [bind({ hostPort: held.port, hostPortEnd: held.port + 20 })]);
  t.equal(got.length, 1);
  t.ok(
    got[0] !== undefined && got[0].hostPort > held.port && got[0].hostPort === got[0].hostPortEnd,
    `one port of the range: ${got[0]?.hostPort}`,
  );
  t.equal(await fetchText(held.port), 'host service', 'the host process keeps its port');
});

t.test('loopback connections are relayed to the container (TCP), another endpoint is refused, release frees', async (t) => {
  const ports = new HostPorts(log);
  const container = await tcpServer('from the container');
  const hostPort = await freePort();
  const [b] = await ports.claim({ endpointId: EP, address: LO }, [
    bind({ containerPort: container.port, hostPort, hostPortEnd: hostPort }),
  ]);
  t.equal(b?.hostPort, hostPort);
  t.equal(await fetchText(hostPort), 'from the container');
  t.same(await ports.claim({ endpointId: EP, address: LO }, [bind({ hostPort: 1, hostPortEnd: 1 })]), [b], 'again: the ports held');
  await t.rejects(ports.claim({ endpointId: 'f'.repeat(64), address: LO }, [bind({ hostPort, hostPortEnd: hostPort })]), {
    code: 'PORT_IN_USE',
    message: new RegExp(`host tcp port ${hostPort} on 127\\.0\\.0\\.1 is in use by the ovsnet endpoint eeeeeeeeeeee`),
  });
  const probe = net.createServer();
  const err = await new Promise<NodeJS.ErrnoException | undefined>((r) => {
    probe.once('error', r);
    probe.listen(hostPort, LO, () => r(undefined));
  });
  t.equal(err?.code, 'EADDRINUSE', 'a host process cannot take the port while it is published');
  await ports.release(EP);
  await ports.release(EP);
  const again = await tcpServer('host again', hostPort);
  t.equal(again.port, hostPort, 'free once released (twice is fine)');
});

t.test('a client that half-closes at once (nc </dev/null) still gets the reply the container sends after its FIN', async (t) => {
  const ports = new HostPorts(log);
  t.teardown(() => ports.release(EP));
  // The container answers only once the request is complete (the client's FIN), a little later.
  const container = net.createServer({ allowHalfOpen: true }, (c) => {
    c.resume();
    c.on('end', () => setTimeout(() => c.end('after your FIN'), 50));
  });
  await new Promise<void>((r) => container.listen(0, LO, r));
  t.teardown(() => new Promise<void>((r) => container.close(() => r())));
  const containerPort = (container.address() as net.AddressInfo).port;
  const [b] = await ports.claim({ endpointId: EP, address: LO }, [bind({ containerPort, hostPort: 0, hostPortEnd: 0 })]);
  const text = await new Promise<string>((resolve, reject) => {
    const c = net.connect({ host: LO, port: b?.hostPort ?? 0, allowHalfOpen: true }, () => c.end('request'));
    let got = '';
    c.on('data', (d: Buffer) => (got += d.toString()));
    c.on('close', () => resolve(got));
    c.on('error', reject);
  });
  t.equal(text, 'after your FIN');
});

t.test('UDP: datagrams relayed both ways; HostPort 0 picks from the dynamic range', async (t) => {
  const ports = new HostPorts(log, [40000, 40100]);
  t.teardown(() => ports.release(EP));
  const echo = dgram.createSocket('udp4');
  echo.on('message', (m, r) => echo.send(Buffer.concat([Buffer.from('echo:'), m]), r.port, r.address));
  await new Promise<void>((r) => echo.bind(0, LO, r));
  t.teardown(() => new Promise<void>((r) => echo.close(() => r())));
  const [b] = await ports.claim({ endpointId: EP, address: LO }, [bind({ proto: 'udp', containerPort: echo.address().port })]);
  t.ok(b !== undefined && b.hostPort >= 40000 && b.hostPort <= 40100, `dynamic: ${b?.hostPort}`);
  const client = dgram.createSocket('udp4');
  t.teardown(() => new Promise<void>((r) => client.close(() => r())));
  const reply = new Promise<string>((r) => client.once('message', (m) => r(m.toString())));
  client.send('ping', b?.hostPort ?? 0, LO);
  t.equal(await reply, 'echo:ping');
});

t.test('IPv6 host addresses: relayed to the IPv6 address, a host service on ::1 never shadowed, IPv4 and IPv6 ports apart', async (t) => {
  const ports = new HostPorts(log);
  t.teardown(async () => {
    for (const id of [EP, OTHER]) await ports.release(id);
  });
  const container = await tcpServer('container over IPv6', 0, '::1');
  const hostService = await tcpServer('host service on ::1', 0, '::1');
  await t.rejects(
    ports.claim({ endpointId: EP, addressV6: '::1' }, [
      bind({ hostIp: '::1', hostPort: hostService.port, hostPortEnd: hostService.port, containerPort: container.port }),
    ]),
    { code: 'PORT_IN_USE', message: new RegExp(`^host tcp port ${hostService.port} on ::1 is in use by a process of this host`) },
  );
  await t.rejects(
    ports.claim({ endpointId: EP, addressV6: '::1' }, [bind({ hostIp: '::', hostPort: hostService.port, hostPortEnd: hostService.port })]),
    { code: 'PORT_IN_USE', message: new RegExp(`^host tcp port ${hostService.port} on :: is in use by a process of this host`) },
    '[::] would shadow it too',
  );
  t.equal(await fetchText(hostService.port, '::1'), 'host service on ::1', 'the host service still answers');
  // A port held on IPv4 only: its IPv6 twin is free, and the other way.
  const v4held = await tcpServer('host service on IPv4', 0);
  const [got] = await ports.claim({ endpointId: EP, addressV6: '::1' }, [
    bind({ hostIp: '::', hostPort: v4held.port, hostPortEnd: v4held.port, containerPort: container.port }),
  ]);
  t.equal(got?.hostPort, v4held.port, '[::]:PORT is IPv6 only: an IPv4 service on the port does not stop it');
  t.equal(await fetchText(v4held.port, '::1'), 'container over IPv6', '[::1]:PORT relayed to the IPv6 address');
  t.equal(await fetchText(v4held.port), 'host service on IPv4', "and 127.0.0.1:PORT stays the host's");
  await t.rejects(
    ports.claim({ endpointId: OTHER, addressV6: '::1' }, [bind({ hostIp: '::1', hostPort: v4held.port, hostPortEnd: v4held.port })]),
    { code: 'PORT_IN_USE', message: /is in use by the ovsnet endpoint eeeeeeeeeeee/ },
    'an endpoint on [::] holds the port for every IPv6 address',
  );
  await t.rejects(ports.claim({ endpointId: OTHER, address: LO }, [bind({ hostIp: '::1', hostPort: 9, hostPortEnd: 9 })]), {
    code: 'PORT_UNSUPPORTED',
    message: /^cannot publish port 80 on the IPv6 host address ::1: the container has no IPv6 address on this network/,
  });
  await t.rejects(ports.claim({ endpointId: OTHER, addressV6: '::1' }, [bind({ hostPort: 9, hostPortEnd: 9 })]), {
    code: 'PORT_UNSUPPORTED',
    message: /^cannot publish port 80 on the IPv4 host address 127\.0\.0\.1: the container has no IPv4 address on this network/,
  });
});

t.test('one port published on IPv4 and on [::] by one endpoint: two sockets, each family to its address', async (t) => {
  const ports = new HostPorts(log);
  t.teardown(() => ports.release(EP));
  const v4 = await tcpServer('container over IPv4');
  const v6 = await tcpServer('container over IPv6', v4.port, '::1');
  const p = await freePort();
  const got = await ports.claim({ endpointId: EP, address: LO, addressV6: '::1' }, [
    bind({ hostIp: '', hostPort: p, hostPortEnd: p, containerPort: v4.port }),
    bind({ hostIp: '::', hostPort: p, hostPortEnd: p, containerPort: v6.port }),
  ]);
  t.same(
    got.map((b) => [b.hostIp, b.hostPort]),
    [
      ['', p],
      ['::', p],
    ],
  );
  t.equal(await fetchText(p), 'container over IPv4');
  t.equal(await fetchText(p, '::1'), 'container over IPv6');
});

t.test('UDP on an IPv6 host address: datagrams relayed to the IPv6 address', async (t) => {
  const ports = new HostPorts(log, [40200, 40300]);
  t.teardown(() => ports.release(EP));
  const echo = dgram.createSocket('udp6');
  echo.on('message', (m, r) => echo.send(`echo6:${m.toString()}`, r.port, r.address));
  await new Promise<void>((r) => echo.bind(0, '::1', r));
  t.teardown(() => new Promise<void>((r) => echo.close(() => r())));
  const [b] = await ports.claim({ endpointId: EP, addressV6: '::1' }, [
    bind({ proto: 'udp', hostIp: '::1', containerPort: echo.address().port }),
  ]);
  const client = dgram.createSocket('udp6');
  t.teardown(() => new Promise<void>((r) => client.close(() => r())));
  const reply = new Promise<string>((r) => client.once('message', (m) => r(m.toString())));
  client.send('ping', b?.hostPort ?? 0, '::1');
  t.equal(await reply, 'echo6:ping');
});

t.test('sctp is refused with the way out; the dynamic range read from the kernel', async (t) => {
  const ports = new HostPorts(log);
  await t.rejects(ports.claim({ endpointId: EP, address: LO }, [bind({ proto: 'sctp', hostPort: 9, hostPortEnd: 9 })]), {
    code: 'PORT_UNSUPPORTED',
    message: /cannot publish sctp port 80: ovsnet publishes tcp and udp ports only/,
  });
  await t.rejects(ports.claim({ endpointId: EP, address: LO }, [bind({ hostIp: '192.0.2.99', hostPort: 9, hostPortEnd: 9 })]), {
    code: 'PORT_UNSUPPORTED',
    message: /cannot publish tcp port 9 on 192\.0\.2\.99: 192\.0\.2\.99 is not an address of this host/,
  });
  const [lo, hi] = dynamicRange();
  t.ok(lo >= 1 && hi <= 65535 && lo <= hi);
  t.same(dynamicRange('/nonexistent'), [49153, 60999], "Docker's default without /proc");
});

t.test('a TCP relay holds at most its cap of connections at once; past it new ones are closed, earlier ones kept', async (t) => {
  const held = new Set<net.Socket>();
  const container = net.createServer((c) => (held.add(c), c.on('error', () => undefined)));
  await new Promise<void>((r) => container.listen(0, LO, r));
  t.teardown(() => {
    held.forEach((c) => c.destroy());
    return new Promise<void>((r) => container.close(() => r()));
  });
  const hostPort = await freePort();
  const relay = await listenTcp(
    bind({ containerPort: (container.address() as net.AddressInfo).port, hostPort, hostPortEnd: hostPort }),
    LO,
    LO,
    log,
    3,
  );
  if (relay === 'in use') throw new Error('port in use');
  t.teardown(() => relay.close());
  const clients = await Promise.all(
    Array.from(
      { length: 6 },
      () =>
        new Promise<net.Socket>((r) => {
          const c = net.connect(hostPort, LO, () => r(c));
          c.on('error', () => undefined);
        }),
    ),
  );
  t.teardown(() => clients.forEach((c) => c.destroy()));
  await new Promise((r) => setTimeout(r, 300));
  t.equal(held.size, 3, 'the container sees 3 connections');
  t.equal(clients.filter((c) => c.readyState === 'open').length, 3, 'the other 3 clients were closed');
  t.equal(RELAY_MAX_CONNECTIONS, 1024, "the daemon's cap per published port");
});
