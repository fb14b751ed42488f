/**
 * The options reference (docs/options.md, its Options table) against the code: every key the driver takes
 * with -o (the keys its refusal of an unknown one lists, and group-options.ts's), with
 * --driver-opt (qos-options.ts) and with --ipam-opt (pool-checks.ts) has a row, and every ovsnet key a
 * row names is one the code takes with that flag.
 */
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { GROUP_OPTIONS } from '../src/driver/model/group-options.js';
import { parseNetworkOptions } from '../src/driver/model/options.js';
import { QOS_OPTIONS } from '../src/driver/model/qos-options.js';
import { isOvsnetError } from '../src/lib/errors.js';
import { IPAM_OPTIONS } from '../src/ipam-driver/pools/pool-checks.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const page = fs.readFileSync(`${root}docs/options.md`, 'utf8');

/** The Options section's table rows, as cells. */
function optionRows(): string[][] {
  const start = page.indexOf('\n## Options\n');
  const end = page.indexOf('\n## ', start + 1);
  if (start < 0) throw new Error('docs/options.md has no "## Options" section');
  return page
    .slice(start, end < 0 ? undefined : end)
    .split('\n')
    .filter((l) => l.startsWith('| ') && !l.startsWith('| Option |'))
    .map((l) =>
      l
        .split(/(?<!\\)\|/)
        .slice(1, -1)
        .map((c) => c.trim()),
    );
}

/** What the driver answers for `-o KEY`: is KEY one of its options (whatever it says of the value)? */
function driverTakes(key: string): boolean {
  try {
    parseNetworkOptions({ 'com.docker.network.generic': { [key]: 'x' } });
    return true;
  } catch (err) {
    return !(isOvsnetError(err) && err.message.includes('is not an ovsnet option'));
  }
}

/** The -o keys the driver's refusal of an unknown key lists as valid. */
function driverKeys(): string[] {
  try {
    parseNetworkOptions({ 'com.docker.network.generic': { 'ovsnet.no-such-option': 'x' } });
  } catch (err) {
    const valid = (err instanceof Error ? err.message : '').split('valid ones: ')[1] ?? '';
    return [...valid.matchAll(/(?:^|, )(ovsnet\.[a-z-]+) \(/g)].map((m) => m[1] ?? '');
  }
  throw new Error('-o ovsnet.no-such-option was accepted');
}

const rows = optionRows();
const named = rows.flatMap((cells) =>
  [...(cells[0] ?? '').matchAll(/`(-o|--driver-opt|--ipam-opt) (ovsnet\.[a-z-]+)`/g)].map((m) => ({ flag: m[1] ?? '', key: m[2] ?? '' })),
);
const documents = (flag: string, key: string) => named.some((n) => n.flag === flag && n.key === key);

t.test('every row has its option, valid form, default and what it does', async (t) => {
  t.ok(rows.length >= 15, `${rows.length} rows`);
  for (const cells of rows) {
    t.equal(cells.length, 4, `${cells[0] ?? ''}: four cells`);
    t.ok(
      (cells[1] ?? '') !== '' && (cells[2] ?? '') !== '' && (cells[3] ?? '').length > 20,
      `${cells[0] ?? ''}: a form, a default, what it does`,
    );
  }
});

t.test('every option the code takes has its row', async (t) => {
  const network = [...driverKeys(), ...Object.keys(GROUP_OPTIONS)];
  t.ok(network.includes('ovsnet.tag') && network.includes('ovsnet.bandwidth'), `-o keys read from the refusal: ${network.join(' ')}`);
  for (const key of network) t.ok(documents('-o', key), `-o ${key}`);
  for (const key of Object.keys(QOS_OPTIONS)) t.ok(documents('--driver-opt', key), `--driver-opt ${key}`);
  for (const key of Object.keys(IPAM_OPTIONS)) t.ok(documents('--ipam-opt', key), `--ipam-opt ${key}`);
});

t.test('every ovsnet option a row names is one the code takes with that flag', async (t) => {
  for (const { flag, key } of named) {
    const taken =
      flag === '-o' ? driverTakes(key) || key in GROUP_OPTIONS : flag === '--driver-opt' ? key in QOS_OPTIONS : key in IPAM_OPTIONS;
    t.ok(taken, `${flag} ${key}`);
  }
  t.notOk(driverTakes('ovsnet.no-such-option'), 'an unknown key is told apart');
});
