/**
 * pino JSON logs. The destination is injected so tests can parse the lines they assert on;
 * errors go under `err`, context in child loggers. Every line logged while a Docker call is
 * being handled carries that call's requestId, whichever module logs it: the id travels in
 * AsyncLocalStorage (set by the server per request) and a pino mixin adds it.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { DestinationStream, Logger } from 'pino';
import { requirePackage } from './packages.js';
import type { LogLevel } from '../config/config.js';

export type { Logger };

export const requestContext = new AsyncLocalStorage<{ readonly requestId: string }>();

export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  const { pino } = requirePackage('pino');
  const options = {
    level,
    base: { name: 'ovsnet' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
    // A fresh object per line: pino merges each line's fields into what the mixin returns, and
    // returning the context itself let every line of a call add its fields to all later ones.
    mixin: () => {
      const context = requestContext.getStore();
      return context === undefined ? {} : { requestId: context.requestId };
    },
  };
  return destination === undefined ? pino(options) : pino(options, destination);
}
