/** Every launcher of `ovsnet serve` gives node the same heap flags (src/daemon/memory.ts): the plugin, the systemd unit, scripts/start.sh. */
import fs from 'node:fs';
import t from 'tap';
import { launchFlags } from '../harness/launch.js';
import { MAIN } from '../harness/host.js';

const root = new URL('../../../', import.meta.url);
const read = (file: string) => fs.readFileSync(new URL(file, root), 'utf8');

t.test(
  'the plugin, the systemd unit and start.sh start node with the same flags, --expose-gc and --optimize-for-size among them',
  async (t) => {
    const plugin = launchFlags(MAIN);
    t.ok(plugin.includes('--expose-gc'), `plugin/config.json's entrypoint: ${plugin.join(' ')}`);
    t.ok(
      plugin.some((f) => /^--max-semi-space-size=\d+$/.test(f)),
      'a small young generation',
    );
    t.ok(plugin.includes('--optimize-for-size'), "V8's memory-saving heap policy (src/daemon/memory.ts)");
    const service = /^ExecStart=\/usr\/bin\/node (.*) \/opt\/ovsnet\/dist\/src\/main\.js serve$/m.exec(read('deploy/ovsnet.service'))?.[1];
    t.equal(service, plugin.join(' '), 'deploy/ovsnet.service');
    const start = /^exec node (.*) dist\/src\/main\.js serve$/m.exec(read('scripts/start.sh'))?.[1];
    t.equal(start, plugin.join(' '), 'scripts/start.sh');
  },
);
