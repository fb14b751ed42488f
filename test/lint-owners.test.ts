/**
 * The lint rules that keep one owner per side effect (eslint.config.js): only the owners of a key
 * family import src/store/keys.ts, and only src/lib/exec.ts imports child_process. Each rule is
 * taken from the project's own configuration for a path and run on a planted import.
 */
import { ESLint, Linter } from 'eslint';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const root = fileURLToPath(new URL('../../', import.meta.url));
const eslint = new ESLint({ cwd: root });
const linter = new Linter({ configType: 'flat' });

async function refusals(file: string, text: string): Promise<string[]> {
  const config = (await eslint.calculateConfigForFile(file)) as { rules?: Record<string, Linter.RuleEntry> };
  const rule = config.rules?.['no-restricted-imports'];
  if (rule === undefined) return [];
  const messages = linter.verify(text, [{ files: ['**/*.ts'], rules: { 'no-restricted-imports': rule } }], file);
  return messages.map((m) => m.message);
}

const KEYS = "import { keys } from '../store/keys.js';\n";
const KEYS_DEEP = "import { keys } from '../../store/keys.js';\n";
const SPAWN = "import { spawn } from 'node:child_process';\n";

t.test('store/keys: refused outside the owners, allowed in them', async (t) => {
  t.match((await refusals('src/cli/planted.ts', KEYS)).join('\n'), /Only the owner of a key family/);
  t.match((await refusals('src/driver/vxlan/planted.ts', KEYS_DEEP)).join('\n'), /Only the owner of a key family/);
  t.match((await refusals('src/ipam-driver/allocation/planted.ts', KEYS_DEEP)).join('\n'), /Only the owner of a key family/);
  t.same(await refusals('src/driver/records/planted.ts', KEYS_DEEP), []);
  t.same(await refusals('src/ipam-driver/state/planted.ts', KEYS_DEEP), []);
  t.same(await refusals('src/cni/attachments.ts', KEYS), []);
  t.same(await refusals('src/cluster/hosts.ts', KEYS), []);
  t.same(await refusals('src/store/planted.ts', "import { keys } from './keys.js';\n"), []);
});

t.test('child_process: refused everywhere in src but the spawner, owners included', async (t) => {
  t.match((await refusals('src/driver/records/planted.ts', SPAWN)).join('\n'), /src\/lib\/exec\.ts/);
  t.match((await refusals('src/cni/planted.ts', SPAWN)).join('\n'), /src\/lib\/exec\.ts/);
  t.same(await refusals('src/lib/exec.ts', SPAWN), []);
  t.match((await refusals('src/lib/exec.ts', KEYS)).join('\n'), /Only the owner of a key family/);
});
