/**
 * pino JSON logs. The destination is injected so tests can parse the lines they assert on;
 * errors go under `err`, context in child loggers. Every line logged while a Docker call is
 * being handled carries that call's requestId, whichever module logs it: the id travels in
 * AsyncLocalStorage (set by the server per request) and a pino mixin adds it.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { pino, type DestinationStream, type Logger } from 'pino';
import type { LogLevel } from './config.js';

export type { Logger };

export const requestContext = new AsyncLocalStorage<{ readonly requestId: string }>();

export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { name: 'ovsnet' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
    mixin: () => requestContext.getStore() ?? {},
  };
  return destination === undefined ? pino(options) : pino(options, destination);
}
