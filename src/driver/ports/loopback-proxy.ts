/**
 * The socket holding one published host port, and the relay of what reaches it to the
 * container: Docker's docker-proxy, in process. Only the host's own connections to 127.0.0.0/8
 * and ::1 reach it (every other address is DNATed before any socket sees it, nat-rules.ts). TCP
 * connections are piped; UDP datagrams are relayed per client through a socket of their own,
 * closed after a minute without traffic (docker-proxy's UDP timeout is 90 s).
 */
import dgram from 'node:dgram';
import net from 'node:net';
import { OvsnetError, messageOf } from '../../lib/errors.js';
import type { Logger } from '../../lib/log.js';
import type { PortBinding } from '../model/records.js';

export interface Held {
  /** As published: hostPort = hostPortEnd = the port held. */
  readonly binding: PortBinding;
  /** Closes the socket and every relay of it. Idempotent. */
  close(): Promise<void>;
}

const UDP_IDLE_MS = 60_000;

/**
 * Connections relayed at once per published TCP port (each holds two descriptors: the
 * client's and the container's); past it Node closes new ones as they come. Only the host's own
 * processes reach the relay. No idle timeout: as with docker-proxy, a quiet connection (a
 * database session, ssh) is the application's to end.
 */
export const RELAY_MAX_CONNECTIONS = 1024;

/** Listens on host:port; 'in use' when another socket holds it (EADDRINUSE). */
export function listenTcp(
  binding: PortBinding,
  host: string,
  to: string,
  log: Logger,
  maxConnections = RELAY_MAX_CONNECTIONS,
): Promise<Held | 'in use'> {
  const conns = new Set<net.Socket>();
  // Half-closes travel through, as docker-proxy's CloseWrite does: a client that sends its
  // request and shuts its side (`nc </dev/null`, HTTP/1.0 clients) still gets the reply the
  // container sends after that FIN. Without allowHalfOpen the relay closed the client as soon as
  // its FIN came, and the reply was lost whenever it came later.
  const server = net.createServer({ allowHalfOpen: true }, (client) => {
    const upstream = net.connect({ host: to, port: binding.containerPort, allowHalfOpen: true });
    conns.add(client).add(upstream);
    const fail = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', fail);
    upstream.on('error', fail);
    // Both directions done (or the client gone): nothing is left to relay.
    client.on('close', () => {
      upstream.destroy();
      conns.delete(client);
    });
    upstream.on('close', () => conns.delete(upstream));
    client.pipe(upstream).pipe(client); // an end on either side ends the other's write side only
  });
  server.maxConnections = maxConnections;
  return new Promise((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE') resolve('in use');
      else reject(bindError(binding, host, err));
    });
    server.listen({ host, port: binding.hostPort, exclusive: true, ipv6Only: host.includes(':') }, () => {
      server.on('error', (err) => log.warn({ err }, `published port ${binding.hostPort}/tcp: ${messageOf(err)}`));
      resolve({
        binding,
        close: () =>
          new Promise<void>((done) => {
            for (const c of conns) c.destroy();
            server.close(() => done());
          }),
      });
    });
  });
}

/** Binds host:port for UDP; 'in use' when another socket holds it. */
export function listenUdp(binding: PortBinding, host: string, to: string, log: Logger): Promise<Held | 'in use'> {
  const sock = dgram.createSocket(host.includes(':') ? { type: 'udp6', ipv6Only: true } : { type: 'udp4' });
  const relays = new Map<string, { sock: dgram.Socket; timer: NodeJS.Timeout }>();
  const drop = (key: string): void => {
    const r = relays.get(key);
    if (r === undefined) return;
    relays.delete(key);
    clearTimeout(r.timer);
    r.sock.close();
  };
  sock.on('message', (msg, rinfo) => {
    const key = `${rinfo.address}:${rinfo.port}`;
    let r = relays.get(key);
    if (r === undefined) {
      const up = dgram.createSocket(to.includes(':') ? 'udp6' : 'udp4');
      up.on('message', (reply) => {
        sock.send(reply, rinfo.port, rinfo.address);
        const cur = relays.get(key);
        if (cur !== undefined) cur.timer.refresh();
      });
      up.on('error', () => drop(key));
      up.connect(binding.containerPort, to);
      r = { sock: up, timer: setTimeout(() => drop(key), UDP_IDLE_MS).unref() };
      relays.set(key, r);
    }
    r.timer.refresh();
    const relay = r.sock;
    // A connected socket may not be connected yet: send once it is.
    const send = (): void => relay.send(msg, () => undefined);
    try {
      send();
    } catch {
      relay.once('connect', send);
    }
  });
  return new Promise((resolve, reject) => {
    sock.once('error', (err: NodeJS.ErrnoException) => {
      sock.close();
      if (err.code === 'EADDRINUSE') resolve('in use');
      else reject(bindError(binding, host, err));
    });
    sock.bind({ address: host, port: binding.hostPort, exclusive: true }, () => {
      sock.removeAllListeners('error');
      sock.on('error', (err) => log.warn({ err }, `published port ${binding.hostPort}/udp: ${messageOf(err)}`));
      resolve({
        binding,
        close: () =>
          new Promise<void>((done) => {
            for (const key of [...relays.keys()]) drop(key);
            sock.close(() => done());
          }),
      });
    });
  });
}

function bindError(binding: PortBinding, host: string, err: NodeJS.ErrnoException): OvsnetError {
  const why = err.code === 'EADDRNOTAVAIL' ? `${host} is not an address of this host` : messageOf(err);
  return new OvsnetError(
    'PORT_UNSUPPORTED',
    `cannot publish ${binding.proto} port ${binding.hostPort} on ${host}: ${why}; give an address of this host, or none`,
    { cause: err },
  );
}
