// scripts/tap-failures.mjs, which the test command runs last: every failed assertion named by
// its whole path with its diagnostics, subtests' summaries not repeated, a dead file named.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const script = fileURLToPath(new URL('../../../scripts/tap-failures.mjs', import.meta.url));

// The shape of tap's --reporter=tap stream (taken from a run of a file with these failures).
const STREAM = `TAP version 14
1..3
# Subtest: dist/test/a.test.js
    # Subtest: outer
        ok 1 - fine
        # Subtest: inner
            not ok 1 - one is two
              ---
              compare: ===
              diff: |
                -2
                +1
              ...
            
            ok 2 - should be equal
            1..2
        not ok 2 - inner # time=15.695ms
          ---
          at:
            lineNumber: 4
          ...
        
        not ok 3 - plain false
        1..3
    not ok 1 - outer # time=23.472ms
    # Subtest: good
        ok 1 - should be equal
        1..1
    ok 2 - good # time=0.461ms
    1..2
not ok 1 - dist/test/a.test.js # time=31.693ms
  ---
  exitCode: 1
  ...
# Subtest: dist/test/b.test.js
    ok 1 - all well
    1..1
ok 2 - dist/test/b.test.js # time=3ms
# Subtest: dist/test/c.test.js
    1..0 # no tests found
not ok 3 - dist/test/c.test.js # time=772.145ms
  ---
  exitCode: 1
  signal: null
  ...
`;

const run = (...texts: string[]): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-tapfail-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const files = texts.map((text, i) => {
    const file = path.join(dir, `lane${i}.out`);
    fs.writeFileSync(file, text);
    return file;
  });
  return execFileSync(process.execPath, [script, ...files, path.join(dir, 'absent.out')], { encoding: 'utf8' });
};

void t.test('each failure once, by its path, with its diagnostics; a dead file by its name', async (t) => {
  const out = run(STREAM);
  const heads = out.split('\n').filter((l) => l.startsWith('not ok: '));
  t.same(heads, [
    'not ok: dist/test/a.test.js > outer > inner > one is two',
    'not ok: dist/test/a.test.js > outer > plain false',
    'not ok: dist/test/c.test.js',
  ]);
  t.match(out, /one is two\n {4}compare: ===\n {4}diff: \|\n {6}-2\n {6}\+1\n/, 'its diagnostics, indented under it');
  t.match(out, /dist\/test\/c\.test\.js\n {4}exitCode: 1\n {4}signal: null\n/);
  t.notMatch(out, /lineNumber/, "a subtest's summary of failures already named is not printed");
});

void t.test('nothing printed when all passed, across several files (lanes), a missing one skipped', async (t) => {
  const passing = STREAM.split('# Subtest: dist/test/b.test.js')[1] ?? '';
  t.equal(run(`# Subtest: dist/test/b.test.js${passing.split('# Subtest: dist/test/c')[0]}`, 'TAP version 14\n'), '');
});
