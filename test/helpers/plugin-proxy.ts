/**
 * A unix-socket proxy between dockerd and ovsnet, for crash tests: it sees which Docker call is
 * in flight (so that a kill lands inside one), and while ovsnet is down it holds new connections
 * until ovsnet listens again, as Docker's own retry of a refused connection would deliver them
 * (with their body). A connection ovsnet dies on is broken for Docker too.
 */
import fs from 'node:fs';
import net from 'node:net';

export class PluginProxy {
  /** Calls sent to ovsnet and not answered yet, by connection. */
  private readonly inFlight = new Map<net.Socket, string>();
  private readonly server: net.Server;
  private closed = false;

  constructor(
    private readonly listenPath: string,
    private readonly upstreamPath: string,
    /** Called when a call is forwarded to ovsnet. */
    private readonly onCall: (method: string) => void = () => undefined,
  ) {
    this.server = net.createServer((client) => this.serve(client));
  }

  async listen(): Promise<void> {
    fs.rmSync(this.listenPath, { force: true });
    await new Promise<void>((resolve) => this.server.listen(this.listenPath, resolve));
  }

  /** The Docker calls ovsnet is handling now. */
  calls(): string[] {
    return [...this.inFlight.values()];
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const s of this.inFlight.keys()) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private serve(client: net.Socket): void {
    const held: Buffer[] = [];
    let upstream: net.Socket | undefined;
    client.on('error', () => undefined);
    client.on('data', (d: Buffer) => {
      const method = /^POST \/(\S+) HTTP/.exec(d.toString('latin1', 0, 200))?.[1];
      if (upstream === undefined) held.push(d);
      else this.forward(upstream, d, method);
    });
    client.on('close', () => upstream?.destroy());
    const deadline = Date.now() + 15_000;
    const connect = () => {
      if (this.closed || client.destroyed) return;
      const up = net.connect(this.upstreamPath);
      up.once('error', () => {
        up.destroy();
        if (Date.now() < deadline) setTimeout(connect, 50);
        else client.destroy();
      });
      up.once('connect', () => {
        up.removeAllListeners('error');
        up.on('error', () => undefined);
        upstream = up;
        for (const d of held.splice(0)) this.forward(up, d, /^POST \/(\S+) HTTP/.exec(d.toString('latin1', 0, 200))?.[1]);
        up.on('data', (d: Buffer) => {
          this.inFlight.delete(up);
          client.write(d);
        });
        // ovsnet died or closed: Docker sees the connection break, as without the proxy.
        up.on('close', () => {
          this.inFlight.delete(up);
          client.destroy();
        });
      });
    };
    connect();
  }

  private forward(up: net.Socket, d: Buffer, method: string | undefined): void {
    if (method !== undefined) {
      this.inFlight.set(up, method);
      this.onCall(method);
    }
    up.write(d);
  }
}
