/**
 * The node flags ovsnet's launchers give the daemon (plugin/config.json's entrypoint: the V8 heap
 * settings, src/daemon/memory.ts), so that tests and benchmarks run it as it is shipped.
 */
import fs from 'node:fs';
import path from 'node:path';

/** The flags between node and main.js in the entrypoint of the plugin/config.json beside `main`'s build; none without one. */
export function launchFlags(main: string): string[] {
  const config = path.join(path.dirname(main), '..', '..', 'plugin', 'config.json');
  if (!fs.existsSync(config)) return [];
  const entrypoint = (JSON.parse(fs.readFileSync(config, 'utf8')) as { entrypoint?: string[] }).entrypoint ?? [];
  const at = entrypoint.findIndex((a) => a.endsWith('/main.js'));
  return at < 1 ? [] : entrypoint.slice(1, at);
}
