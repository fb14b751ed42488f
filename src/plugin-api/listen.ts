/**
 * Listening on the plugin socket: the directory is created, a stale socket (one nobody answers
 * on) is removed, a live one is refused, and the socket is made 0660.
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';

function answers(socket: string): Promise<boolean> {
  return new Promise((resolve) => {
    const c = net.connect(socket);
    const done = (ok: boolean) => {
      c.destroy();
      resolve(ok);
    };
    c.once('connect', () => done(true));
    c.once('error', () => done(false));
    c.setTimeout(500, () => done(false));
  });
}

export async function listenOnSocket(app: FastifyInstance, socket: string): Promise<void> {
  fs.mkdirSync(path.dirname(socket), { recursive: true });
  if (fs.existsSync(socket)) {
    if (await answers(socket)) {
      throw new Error(`another process already serves ${socket}: stop it first, or set OVSNET_SOCKET to another path`);
    }
    fs.rmSync(socket, { force: true });
  }
  await app.listen({ path: socket });
  fs.chmodSync(socket, 0o660);
}

/** Removes the socket if it is still ours; idempotent. */
export function removeSocket(socket: string): void {
  fs.rmSync(socket, { force: true });
}
