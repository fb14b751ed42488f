/**
 * The lint rules that keep one owner per side effect (eslint.config.js): only the owners of a key
 * family import src/store/keys.ts, only src/lib/exec.ts imports child_process, and the CommonJS
 * packages are loaded through src/lib/packages.ts. Each rule is taken from the project's own
 * configuration for a path and run on a planted import.
 */
import { ESLint, Linter } from 'eslint';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import tseslint from 'typescript-eslint';

const root = fileURLToPath(new URL('../../', import.meta.url));
const eslint = new ESLint({ cwd: root });
const linter = new Linter({ configType: 'flat' });
const { PACKAGES } = (await import(path.join(root, 'eslint.config.js'))) as { PACKAGES: readonly string[] };

async function refusals(file: string, text: string): Promise<string[]> {
  const config = (await eslint.calculateConfigForFile(file)) as { rules?: Record<string, Linter.RuleEntry> };
  const rule = config.rules?.['no-restricted-imports'];
  if (rule === undefined) return [];
  const messages = linter.verify(
    text,
    [{ files: ['**/*.ts'], languageOptions: { parser: tseslint.parser }, rules: { 'no-restricted-imports': rule } }],
    file,
  );
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

t.test('CommonJS packages: a value import refused everywhere in src, a type import allowed', async (t) => {
  for (const file of ['src/lib/planted.ts', 'src/store/planted.ts', 'src/lib/exec.ts', 'src/lib/packages.ts']) {
    for (const name of PACKAGES) {
      t.match((await refusals(file, `import x from '${name}';\n`)).join('\n'), /requirePackage/, `${name} in ${file}`);
      t.same(await refusals(file, `import type x from '${name}';\n`), [], `a type from ${name} in ${file}`);
    }
  }
});

t.test("CommonJS packages: the lint's list is packages.ts's, and src has no import() of one", async (t) => {
  const declared = [
    ...fs
      .readFileSync(path.join(root, 'src/lib/packages.ts'), 'utf8')
      .matchAll(/^\s+readonly '?([\w-]+)'?: typeof import\('([^']+)'\);$/gm),
  ];
  t.ok(declared.length > 0, 'packages.ts declares its packages');
  for (const [, key, name] of declared) t.equal(key, name, `${name}: its key is its name`);
  t.same(declared.map(([, , name]) => name).sort(), [...PACKAGES].sort());
  const sources = fs.readdirSync(path.join(root, 'src'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
  for (const file of sources) {
    const text = fs.readFileSync(path.join(root, 'src', file), 'utf8');
    for (const name of PACKAGES) {
      const loads = [...text.matchAll(new RegExp(`(typeof )?import\\(\\s*'${name}'\\s*\\)`, 'g'))].filter((m) => m[1] === undefined);
      t.equal(loads.length, 0, `src/${file} loads ${name} with import()`);
    }
  }
});
