/**
 * ovsnet's version: package.json's, read once. The built code runs from dist/src, package.json
 * two directories up (the managed plugin keeps the same layout under /app).
 */
import fs from 'node:fs';

function read(): string {
  try {
    const pkg = JSON.parse(fs.readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
}

export const VERSION = read();
