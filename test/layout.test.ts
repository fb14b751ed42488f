/**
 * scripts/check-layout.mjs's rule for src/driver's rooms, on a tree made here: a room importing
 * a higher room (a type-only import too) fails with the import named; importing lower passes.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';

const script = fileURLToPath(new URL('../../scripts/check-layout.mjs', import.meta.url));

function check(t: Test, files: Record<string, string>) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-layout-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), text);
  }
  return spawnSync(process.execPath, [script, dir], { encoding: 'utf8' });
}

t.test('a room importing a higher room fails, naming the import', async (t) => {
  const res = check(t, {
    'driver/model/a.ts': "import type { B } from '../ovs/b.js';\nexport type A = B;\n",
    'driver/ovs/b.ts': 'export type B = number;\n',
  });
  t.equal(res.status, 1);
  t.match(res.stderr, 'import up a layer: driver/model/a.ts -> driver/ovs/b.ts');
});

t.test('rooms importing lower rooms, and root files importing rooms, pass', async (t) => {
  const res = check(t, {
    'driver/ovs/b.ts': "import type { A } from '../model/a.js';\nexport type B = A;\n",
    'driver/model/a.ts': 'export type A = number;\n',
    'driver/top.ts': "import type { B } from './ovs/b.js';\nexport type T = B;\n",
  });
  t.equal(res.status, 0, res.stderr);
});

t.test('ipam-driver rooms keep their order too, each folder apart', async (t) => {
  const res = check(t, {
    'ipam-driver/state/a.ts': "import type { B } from '../index/b.js';\nexport type A = B;\n",
    'ipam-driver/index/b.ts': 'export type B = number;\n',
  });
  t.equal(res.status, 1);
  t.match(res.stderr, 'import up a layer: ipam-driver/state/a.ts -> ipam-driver/index/b.ts');
  const across = check(t, {
    'ipam-driver/state/a.ts': 'export type A = number;\n',
    'driver/model/c.ts': "import type { A } from '../../ipam-driver/state/a.js';\nexport type C = A;\n",
  });
  t.equal(across.status, 0, across.stderr);
});

t.test('a folder of more than 15 entries fails, naming it', async (t) => {
  const files: Record<string, string> = {};
  for (let i = 0; i < 16; i++) files[`bag/f${i}.ts`] = `export const x${i} = ${i};\n`;
  const res = check(t, files);
  t.equal(res.status, 1);
  t.match(res.stderr, 'bag/: 16 entries (at most 15)');
  delete files['bag/f15.ts'];
  t.equal(check(t, files).status, 0);
});
