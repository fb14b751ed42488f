/**
 * Reading a hung dockerd's goroutine dump (dockerd-stacks.ts): the deadlock of moby/moby#46661
 * named when both of its goroutines wait, and only then.
 */
import t from 'tap';
import { describeStacks, parseStacks, svcRecordsDeadlock } from './dockerd-stacks.js';

const frame = (fn: string) => `${fn}(0xc000123456, 0xc000654321)\n\t/build/docker.io/src/x.go:123 +0x1a`;
const goroutine = (id: number, state: string, fns: string[]) => [`goroutine ${id} [${state}]:`, ...fns.map(frame)].join('\n');
const LN = 'github.com/docker/docker/vendor/github.com/docker/libnetwork';
const deleting = goroutine(41, 'semacquire, 3 minutes', [
  'sync.runtime_SemacquireMutex',
  'sync.(*Mutex).lockSlow',
  'sync.(*Mutex).Lock',
  `${LN}.(*network).ID`,
  `${LN}.(*controller).processEndpointDelete`,
  `${LN}.(*controller).watchLoop`,
]);
const reading = goroutine(977, 'semacquire, 3 minutes', [
  'sync.runtime_SemacquireMutex',
  'sync.(*Mutex).Lock',
  `${LN}.(*network).getSvcRecords`,
  `${LN}.(*endpoint).sbLeave`,
  `${LN}.(*endpoint).Leave`,
]);
const idle = goroutine(1, 'select', ['github.com/docker/docker/daemon.(*Daemon).Run']) + '\ncreated by main.main\n\t/x.go:1 +0x1';
const elsewhere = goroutine(7, 'semacquire', ['sync.runtime_SemacquireMutex', 'github.com/docker/docker/container.(*State).GetPID']);

t.test('the dump parsed: ids, states, frames without arguments, "created by" left out', async (t) => {
  const gs = parseStacks(['goroutine profile: total 3', deleting, idle, elsewhere].join('\n\n'));
  t.same(
    gs.map((g) => [g.id, g.state, g.frames.length]),
    [
      ['41', 'semacquire, 3 minutes', 6],
      ['1', 'select', 1],
      ['7', 'semacquire', 2],
    ],
  );
  t.equal(gs[0]?.frames[4], `${LN}.(*controller).processEndpointDelete`);
});

t.test('both waiting: the deadlock is named, with its issue', async (t) => {
  const dump = [idle, deleting, elsewhere, reading].join('\n\n');
  t.same(
    svcRecordsDeadlock(parseStacks(dump))?.map((g) => g.id),
    ['41', '977'],
  );
  const text = describeStacks(dump, '/var/run/docker/goroutine-stacks.log');
  t.match(text, /deadlocked in libnetwork: goroutine 41 \(processEndpointDelete\) and 977 \(getSvcRecords\).*moby\/moby#46661/);
  t.match(text, /goroutine 977 \[semacquire, 3 minutes\]: .*getSvcRecords < .*sbLeave/);
  t.notMatch(text, /goroutine 7 /, 'a waiter outside libnetwork is not listed');
});

t.test('one side only, or the other side running: no deadlock claimed', async (t) => {
  t.equal(svcRecordsDeadlock(parseStacks([idle, deleting].join('\n\n'))), undefined);
  const running = reading.replace('[semacquire, 3 minutes]', '[runnable]');
  t.equal(svcRecordsDeadlock(parseStacks([deleting, running].join('\n\n'))), undefined);
  t.match(
    describeStacks([idle, deleting].join('\n\n'), 'f'),
    /^--- dockerd's goroutines \(f\) ---\n2 goroutines, 1 waiting for a mutex in libnetwork\n/,
  );
});

t.test('not a dump: nothing parsed, nothing claimed', async (t) => {
  t.same(parseStacks(''), []);
  t.same(parseStacks('goroutine x [y]:\nnot a dump'), []);
  t.match(describeStacks('garbage', 'f'), /0 goroutines/);
});
