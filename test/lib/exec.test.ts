/** The one spawner: exit code, stdout and stderr answered (never a rejection), its timeout, its stdin (text or a file with no name), its metric. */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { exec, ExecError, failed, spawner, unnamedFile } from '../../src/lib/exec.js';
import { Metrics } from '../../src/metrics.js';

t.test('answers the exit code, stdout and stderr; stdin from input', async (t) => {
  t.same(await exec('sh', ['-c', 'cat; echo oops >&2; exit 3'], 'in\n'), { code: 3, stdout: 'in\n', stderr: 'oops\n' });
  t.equal((await exec('true', [])).code, 0);
});

t.test('a program that cannot start, or outlives its timeout, answers 127 and why', async (t) => {
  const missing = await exec('/nonexistent/ovsnet-no-such-program', []);
  t.equal(missing.code, 127);
  t.match(missing.stderr, /ENOENT/);
  const started = Date.now();
  const slow = await exec('sleep', ['5'], undefined, 100);
  t.equal(slow.code, 127);
  t.match(slow.stderr, /killed after 100 ms/);
  t.ok(Date.now() - started < 4000, 'killed at its timeout');
});

t.test('failed() names the program, its arguments, the exit code and stderr', async (t) => {
  const r = await exec('sh', ['-c', 'echo bad >&2; exit 2']);
  const err = failed('sh', ['-c', 'x'], r);
  t.ok(err instanceof ExecError);
  t.match(err, { program: 'sh', args: ['-c', 'x'], code: 2, stderr: 'bad\n', message: 'sh -c x failed (2): bad' });
  t.equal(failed('true', [], { code: 0, stdout: '', stderr: '' }), undefined);
});

t.test('each run is timed per program, failures counted', async (t) => {
  const m = new Metrics();
  const run = spawner((program, ok, s) => m.observeExec(program, ok, s));
  await run('/bin/sh', ['-c', 'exit 0']);
  await run('sh', ['-c', 'exit 1']);
  const text = await m.registry.metrics();
  t.match(text, 'ovsnet_exec_seconds_count{program="sh"} 2');
  t.match(text, 'ovsnet_exec_failures_total{program="sh"} 1');
});

t.test('stdin as a file: the child opens it again by /dev/stdin, and it never has a name', async (t) => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-exec-'));
  t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const before = process.env.TMPDIR;
  process.env.TMPDIR = tmp;
  t.teardown(() => (before === undefined ? delete process.env.TMPDIR : (process.env.TMPDIR = before)));
  // Read twice (a pipe would give it once), and the temporary directory listed while the child runs.
  const r = await exec('sh', ['-c', 'cat /dev/stdin; cat /dev/stdin; ls -A "$0"; readlink /proc/self/fd/0', tmp], { file: 'flows\n' });
  t.equal(r.code, 0, r.stderr);
  const [first, second, ...rest] = r.stdout.split('\n');
  t.same([first, second], ['flows', 'flows'], 'a file, read from its start at each open');
  t.match(rest.join('\n'), /^\/.*\(deleted\)\n$/, 'nothing in the temporary directory while it ran: the file has no name');
  t.same(fs.readdirSync(tmp), [], 'nor after');
  const big = 'x'.repeat(8 * 2 ** 20);
  t.equal((await exec('sh', ['-c', 'wc -c < /dev/stdin'], { file: big })).stdout.trim(), String(big.length), '8 MiB');
  t.equal((await exec('sh', ['-c', 'wc -c < /dev/stdin'], { file: '' })).stdout.trim(), '0', 'empty');
});

t.test('stdin as a file where O_TMPFILE cannot be: a file and directory unlinked before it is handed over', async (t) => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-exec-'));
  t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const file = await unnamedFile('flows\n', tmp, false);
  t.teardown(() => file.close());
  t.same(fs.readdirSync(tmp), [], 'no name left in the temporary directory');
  t.equal(fs.readFileSync(`/proc/self/fd/${file.fd}`, 'utf8'), 'flows\n', 'the open file holds the text');
  t.equal(fs.fstatSync(file.fd).mode & 0o777, 0o600, 'readable by its owner only');
});

t.test('stdin as a file under a hostile temporary directory: refused with why, nothing made, no hang', async (t) => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-exec-'));
  t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const fifo = path.join(tmp, 'fifo');
  execFileSync('mkfifo', [fifo]);
  fs.writeFileSync(path.join(tmp, 'file'), 'x');
  fs.symlinkSync(fifo, path.join(tmp, 'link-to-fifo'));
  const before = process.env.TMPDIR;
  t.teardown(() => (before === undefined ? delete process.env.TMPDIR : (process.env.TMPDIR = before)));
  for (const name of ['fifo', 'file', 'link-to-fifo', 'missing']) {
    process.env.TMPDIR = path.join(tmp, name);
    const r = await exec('cat', ['/dev/stdin'], { file: 'flows\n' }, 5_000);
    t.equal(r.code, 127, `${name}: not run`);
    t.match(r.stderr, /could not hold cat's input in a file under/, `${name}: says why`);
  }
  t.same(fs.readdirSync(tmp).sort(), ['fifo', 'file', 'link-to-fifo'], 'nothing made');
  t.ok(fs.lstatSync(fifo).isFIFO(), 'the FIFO untouched');
});
