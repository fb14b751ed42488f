/**
 * The CommonJS packages ovsnet runs on, loaded with require(), never `import`: Node 20's ES
 * module loader, importing a CommonJS package, also scans its source (and each file it
 * re-exports) for named exports and wraps what it loads as ES modules, and that stays in memory.
 * Loaded with require(), the daemon's packages took 4.6-8.0 MiB less in one process, and the
 * link worker 2.6 MiB less (docs/benchmarks.md, "CommonJS packages loaded with require()").
 *
 * Their types still come from `import type` and `typeof import()`, which the build erases.
 * ESLint refuses a value import of these packages under src/ (eslint.config.js).
 */
import { createRequire } from 'node:module';

/** Each package by its name, typed as its declarations say. */
interface Packages {
  readonly 'better-sqlite3': typeof import('better-sqlite3');
  readonly cockatiel: typeof import('cockatiel');
  readonly etcd3: typeof import('etcd3');
  readonly fastify: typeof import('fastify');
  readonly 'ip-address': typeof import('ip-address');
  readonly netlink: typeof import('netlink');
  readonly pino: typeof import('pino');
  readonly 'prom-client': typeof import('prom-client');
}

export type PackageName = keyof Packages;

const load = createRequire(import.meta.url);

/** The package `name`, loaded on the first call (Node caches it after). */
export function requirePackage<N extends PackageName>(name: N): Packages[N] {
  return load(name) as Packages[N];
}
