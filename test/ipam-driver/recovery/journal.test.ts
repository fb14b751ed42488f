/**
 * The unconfirmed-changes journal (src/ipam-driver/recovery/unconfirmed.ts): written off the
 * request path (a burst of doubts costs the caller no disk write, and folds into few writes) and
 * bounded (at most JOURNAL_CAP entries on disk; the rest settled from memory, said once).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import t, { type Test } from 'tap';
import { Doubts, JOURNAL_CAP, type Doubt } from '../../../src/ipam-driver/recovery/unconfirmed.js';
import { createLogger } from '../../../src/lib/log.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-journal-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

function doubts(t: Test, name: string) {
  const lines: string[] = [];
  const log = createLogger('warn', new Writable({ write: (c: Buffer, _e, cb) => (lines.push(c.toString()), cb()) }));
  const journal = path.join(dir, name, 'unconfirmed.json');
  // The store stays unreachable: nothing settles.
  const d = new Doubts(() => Promise.reject(new Error('store unreachable')), log, journal);
  t.teardown(() => d.stop());
  return { d, journal, lines };
}
const doubt = (i: number): Doubt => ({ kind: 'release', poolId: 'p', address: `10.0.${i >> 8}.${i & 255}`, at: new Date() });
const onDisk = (journal: string) => (JSON.parse(fs.readFileSync(journal, 'utf8')) as unknown[]).length;

t.test('a burst of doubts costs the caller no disk write; the journal catches up', async (t) => {
  const { d, journal } = doubts(t, 'burst');
  for (let i = 0; i < 3000; i++) d.add(doubt(i));
  // By its effect, not a time bound: adding wrote nothing (each add used to rewrite and fsync the journal).
  t.notOk(fs.existsSync(journal), '3000 doubts added and no journal written while the caller added them');
  await d.flushed();
  t.equal(onDisk(journal), 3000, 'all of them on disk once written');
  t.equal(d.size, 3000);
});

t.test(`at most ${JOURNAL_CAP} doubts on disk; the rest kept in memory, said once`, async (t) => {
  const { d, journal, lines } = doubts(t, 'cap');
  for (let i = 0; i < JOURNAL_CAP + 50; i++) d.add(doubt(i));
  await d.flushed();
  d.add(doubt(99_999));
  await d.flushed();
  t.equal(onDisk(journal), JOURNAL_CAP, 'the journal holds the cap');
  t.equal(d.size, JOURNAL_CAP + 51, 'every doubt is still pending (settled from memory)');
  const said = lines.filter((l) => l.includes(`more than ${JOURNAL_CAP} unconfirmed IPAM changes`));
  t.equal(said.length, 1, 'the error said once');
  t.match(said[0], /keeps the first 10000, the rest are settled from memory only/);
});
