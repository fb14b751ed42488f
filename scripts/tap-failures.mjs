// Names every failed assertion of a TAP stream (tap's --reporter=tap) by its whole path, file
// first, with its diagnostics: the test command prints this last, so a CI that keeps only the
// end of the output still shows what failed (its count alone did not: CI 46 ended with
// "3 failed" and the failures scrolled away with the first lane's output).
//
//   node scripts/tap-failures.mjs FILE...   prints one block per failure; nothing if none
//
// In tap's stream a subtest opens with `# Subtest: NAME` at the indent its own `ok`/`not ok`
// line will have; what it holds is indented four more. A `not ok` with no child lines is a
// failure of its own (an assertion, or a file that died); a `not ok` of a subtest that had
// failures inside is their summary and is not printed again.
import fs from 'node:fs';

const SUBTEST = /^( *)# Subtest: (.*)$/;
const RESULT = /^( *)(not )?ok \d+ - ?(.*?)(?: # (?:time|TODO|SKIP).*)?$/;
const MAX_DIAG_LINES = 30;

/** @param {string[]} lines */
function failures(lines) {
  const out = [];
  /** @type {string[]} names of the open subtests, by depth (indent / 4) */
  const path = [];
  /** @type {Set<number>} depths holding a failure already printed */
  const failedInside = new Set();
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? '';
    const open = SUBTEST.exec(line);
    if (open) {
      const depth = (open[1] ?? '').length / 4;
      path.length = depth;
      path[depth] = open[2] ?? '';
      continue;
    }
    const result = RESULT.exec(line);
    if (!result) continue;
    const indent = (result[1] ?? '').length;
    const depth = indent / 4;
    const failed = result[2] !== undefined;
    const name = result[3] ?? '';
    const summarises = failedInside.has(depth + 1);
    failedInside.delete(depth + 1);
    if (!failed) continue;
    failedInside.add(depth);
    if (summarises) continue;
    const where = [...path.slice(0, depth).filter((p) => p !== ''), name].join(' > ');
    const diag = [];
    if ((lines[i + 1] ?? '').trim() === '---') {
      for (let j = i + 2; j < lines.length && diag.length < MAX_DIAG_LINES; j++) {
        const d = lines[j] ?? '';
        if (d.trim() === '...') break;
        diag.push(d.slice(indent + 2));
      }
    }
    out.push({ where, diag });
  }
  return out;
}

const lines = process.argv
  .slice(2)
  .filter((f) => fs.existsSync(f))
  .flatMap((f) => fs.readFileSync(f, 'utf8').split('\n'));
for (const { where, diag } of failures(lines)) {
  console.log(`not ok: ${where}`);
  for (const d of diag) console.log(`    ${d}`);
}
