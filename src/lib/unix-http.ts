/**
 * HTTP GET over a unix socket, bounded: the one place ovsnet reads Docker's Engine API (the CLI's
 * names and plugins, the daemon's swarm services). An answer must come whole within its timeout
 * and stay under its size limit, else the request is destroyed and the error says which bound it
 * broke; a stream of lines (the Engine's events) is cut when one line outgrows its limit. Only
 * GET exists here: nothing built on this module can change the Engine's state.
 */
import http from 'node:http';
import { expireAfterIo } from './timers.js';

/** The largest answer read whole (a swarm network's verbose view with thousands of tasks fits). */
export const MAX_BODY_BYTES = 8 * 1024 * 1024;

export class UnixHttpError extends Error {}

export interface GetBounds {
  readonly timeoutMs: number;
  readonly maxBytes?: number;
}

const mib = (n: number) => (n % (1024 * 1024) === 0 ? `${n / (1024 * 1024)} MiB` : n % 1024 === 0 ? `${n / 1024} KiB` : `${n} bytes`);

/** The status and the body of `GET path` on `socket`; rejects with a UnixHttpError naming the bound or the failure. */
export function boundedGet(socket: string, path: string, bounds: GetBounds): Promise<{ status: number; body: string }> {
  const maxBytes = bounds.maxBytes ?? MAX_BODY_BYTES;
  return new Promise((resolve, reject) => {
    let settled = false;
    const fail = (message: string, cause?: unknown) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      reject(new UnixHttpError(`GET ${path} on ${socket}: ${message}`, cause === undefined ? undefined : { cause }));
    };
    const req = http.request({ socketPath: socket, path, method: 'GET' }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (d: Buffer) => {
        size += d.length;
        if (size > maxBytes) return fail(`the answer exceeds the limit of ${mib(maxBytes)}; the request was dropped`);
        chunks.push(d);
      });
      res.on('end', () => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') });
      });
      res.on('error', (err) => fail(err.message, err));
    });
    const timer = expireAfterIo(bounds.timeoutMs, () => fail(`no whole answer within ${bounds.timeoutMs} ms`));
    req.on('error', (err) => fail(err.message, err));
    req.end();
  });
}

/** GET over a unix socket: the status and body, or undefined when nothing answers in time (the CLI's: names are a help). */
export async function unixGet(socket: string, path: string, timeoutMs: number): Promise<{ status: number; body: string } | undefined> {
  try {
    return await boundedGet(socket, path, { timeoutMs });
  } catch {
    return undefined;
  }
}

export interface LineStreamOptions {
  /** Bound on the answer's headers (the stream itself may stay quiet for hours). */
  readonly connectTimeoutMs: number;
  readonly maxLineBytes: number;
  /** The stream answered 200: lines follow. */
  readonly onOpen: () => void;
  readonly onLine: (line: string) => void;
  /** Called once: the stream ended (no error), failed or was cut (the error says why), or was closed (never after close()). */
  readonly onEnd: (err?: Error) => void;
}

/** `GET path` on `socket` read as newline-delimited lines until it ends or close() is called. */
export function unixGetLines(socket: string, path: string, o: LineStreamOptions): { close(): void } {
  let done = false;
  const finish = (err?: Error) => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    req.destroy();
    o.onEnd(err);
  };
  const req = http.request({ socketPath: socket, path, method: 'GET' }, (res) => {
    clearTimeout(timer);
    if (res.statusCode !== 200) {
      res.resume();
      return finish(new UnixHttpError(`GET ${path} on ${socket}: answered status ${res.statusCode ?? 0}`));
    }
    o.onOpen();
    let pending: Buffer = Buffer.alloc(0);
    const tooLong = () =>
      finish(new UnixHttpError(`GET ${path} on ${socket}: a line exceeds the limit of ${mib(o.maxLineBytes)}; the stream was dropped`));
    res.on('data', (d: Buffer) => {
      pending = pending.length === 0 ? d : Buffer.concat([pending, d]);
      for (let nl = pending.indexOf(10); nl >= 0; nl = pending.indexOf(10)) {
        const line = pending.subarray(0, nl);
        pending = pending.subarray(nl + 1);
        if (line.length > o.maxLineBytes) return tooLong();
        o.onLine(line.toString('utf8'));
        if (done) return;
      }
      if (pending.length > o.maxLineBytes) tooLong();
    });
    res.on('end', () => finish());
    res.on('error', (err) => finish(err));
  });
  const timer = expireAfterIo(o.connectTimeoutMs, () =>
    finish(new UnixHttpError(`GET ${path} on ${socket}: no answer within ${o.connectTimeoutMs} ms`)),
  );
  req.on('error', (err) => finish(err));
  req.end();
  return {
    close: () => {
      done = true;
      clearTimeout(timer);
      req.destroy();
    },
  };
}
