/**
 * Listening on the plugin socket (and the CNI socket): the directory is created, a stale socket
 * (one nobody answers on) is removed, a live one is refused, and the socket is made 0660. A path
 * that holds anything but a socket (a file, a directory, a symlink) is never deleted: refused.
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { OvsnetError } from '../lib/errors.js';

/** What stands at `socket` when it is not a socket, for the refusal; undefined for a socket or nothing. */
function notSocket(socket: string): string | undefined {
  const st = fs.lstatSync(socket, { throwIfNoEntry: false });
  if (st === undefined || st.isSocket()) return undefined;
  if (st.isSymbolicLink()) return 'a symbolic link';
  if (st.isDirectory()) return 'a directory';
  if (st.isFile()) return 'a regular file';
  return 'not a socket';
}

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

export async function listenOnSocket(app: FastifyInstance, socket: string, setting = 'OVSNET_SOCKET'): Promise<void> {
  fs.mkdirSync(path.dirname(socket), { recursive: true });
  const other = notSocket(socket);
  if (other !== undefined) {
    throw new OvsnetError(
      'SOCKET_PATH_INVALID',
      `${socket} is ${other}, not a socket: ovsnet deletes only a stale socket of its own there; move it away, or set ${setting} to another path`,
    );
  }
  if (fs.existsSync(socket)) {
    if (await answers(socket)) {
      throw new Error(`another process already serves ${socket}: stop it first, or set ${setting} to another path`);
    }
    fs.rmSync(socket, { force: true });
  }
  await app.listen({ path: socket });
  fs.chmodSync(socket, 0o660);
}

/** Removes the socket if it is still ours (a socket: anything else put there stays); idempotent. */
export function removeSocket(socket: string): void {
  if (fs.lstatSync(socket, { throwIfNoEntry: false })?.isSocket() === true) fs.rmSync(socket, { force: true });
}
