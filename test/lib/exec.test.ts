/** The one spawner: exit code, stdout and stderr answered (never a rejection), its timeout, its stdin, its metric. */
import t from 'tap';
import { exec, ExecError, failed, spawner } from '../../src/lib/exec.js';
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
