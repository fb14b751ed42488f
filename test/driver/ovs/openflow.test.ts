/** The one ovs-ofctl client: its error text, its stdin, and one more try only where it is safe and useful. */
import t from 'tap';
import { OpenFlow } from '../../../src/driver/ovs/openflow.js';
import { stdinText as text, type Stdin } from '../../../src/lib/exec.js';

type Answer = { code: number; stdout: string; stderr: string };

/** A fake ovs-ofctl answering from a script, one answer per run. */
function fake(...answers: Answer[]) {
  const calls: { cmd: string; args: readonly string[]; input?: string }[] = [];
  const run = async (cmd: string, args: readonly string[], input?: Stdin) => {
    calls.push({ cmd, args, ...(input === undefined ? {} : { input: text(input) }) });
    return answers.shift() ?? { code: 0, stdout: '', stderr: '' };
  };
  return { of: new OpenFlow(run, 1), calls };
}

const refused = { code: 1, stdout: '', stderr: 'ovs-ofctl: br0: failed to connect to socket (Connection refused)\n' };

t.test('runs ovs-ofctl, OpenFlow13 when asked, with stdin, and answers its stdout', async (t) => {
  const { of, calls } = fake({ code: 0, stdout: 'flows\n', stderr: '' });
  t.equal(await of.ofctl(['add-flows', 'br0', '-'], { of13: true, input: 'a\n' }), 'flows\n');
  t.same(calls, [{ cmd: 'ovs-ofctl', args: ['-O', 'OpenFlow13', 'add-flows', 'br0', '-'], input: 'a\n' }]);
});

t.test('a failure names the command, its exit code and stderr, and what to check', async (t) => {
  const { of } = fake({ code: 1, stdout: '', stderr: 'ovs-ofctl: br0 is not a bridge or a socket\n' });
  await t.rejects(of.ofctl(['del-flows', 'br0', 'cookie=0x1/-1']), {
    code: 'OVS_FAILED',
    message:
      /^ovs-ofctl del-flows br0 cookie=0x1\/-1 failed \(1\): ovs-ofctl: br0 is not a bridge or a socket; is ovs-vswitchd running, and ovs-ofctl installed/,
  });
  const of13 = fake({ code: 2, stdout: '', stderr: 'bad' });
  await t.rejects(of13.of.ofctl(['dump-meters', 'br0'], { of13: true }), {
    message: /^ovs-ofctl -O OpenFlow13 dump-meters br0 failed \(2\): bad; is ovs-vswitchd running, and does the bridge allow OpenFlow13/,
  });
});

t.test('a repeatable command is tried once more when ovs-vswitchd did not answer', async (t) => {
  const once = fake(refused);
  t.equal(await once.of.ofctl(['dump-flows', 'br0']), '');
  t.equal(once.calls.length, 2, 'tried again, and it worked');
  const twice = fake(refused, refused, refused);
  await t.rejects(twice.of.ofctl(['dump-flows', 'br0']), { code: 'OVS_FAILED', message: /Connection refused/ });
  t.equal(twice.calls.length, 2, 'twice at most');
});

t.test('no second try for a command that is not repeatable, or a failure a second try would not mend', async (t) => {
  const meter = fake(refused);
  t.equal((await meter.of.answer(['add-meter', 'br0', 'meter=1'], { of13: true, repeatable: false })).code, 1);
  t.equal(meter.calls.length, 1);
  const refusedFlow = fake({ code: 1, stdout: '', stderr: 'ovs-ofctl: unknown keyword foo\n' });
  await t.rejects(refusedFlow.of.ofctl(['add-flow', 'br0', 'foo']), { code: 'OVS_FAILED' });
  t.equal(refusedFlow.calls.length, 1);
});
