/**
 * `ovsnet trace`'s pure parts: DEST parsed strictly (hostile forms refused with the valid one),
 * and Open vSwitch's own trace text (captured from ovs-appctl ofproto/trace on a bridge with
 * ovsnet's flows: test/cli/fixtures/) read into the flows met, each in words by its cookie, and
 * the verdict the datapath gave. The trace against a live bridge is test/e2e/groups.test.ts's.
 */
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { parseDestination } from '../../src/cli/trace/destination.js';
import { outcomeOf, parseTrace, type TraceNames } from '../../src/cli/trace/explain.js';

const FIXTURES = fileURLToPath(new URL('../../../test/cli/fixtures/', import.meta.url));
const fixture = (name: string) => fs.readFileSync(`${FIXTURES}${name}`, 'utf8');
const names: TraceNames = {
  networkOfTag: (tag) => (tag === 5 ? 'app' : `of tag ${tag}`),
  portOfOdp: (p) => ({ 5: 'vc', 6: 'vt1', 7: 'vt2' })[p],
};

t.test('DEST forms', async (t) => {
  t.same(parseDestination('10.1.0.5'), { host: '10.1.0.5', proto: 'icmp' });
  t.same(parseDestination('db:5432'), { host: 'db', port: 5432, proto: 'tcp' });
  t.same(parseDestination('db-1:53/udp'), { host: 'db-1', port: 53, proto: 'udp' });
  t.same(parseDestination('10.1.0.5/icmp'), { host: '10.1.0.5', proto: 'icmp' });
  t.same(parseDestination('[fd00::5]:80/tcp'), { host: 'fd00::5', port: 80, proto: 'tcp' });
  t.same(parseDestination('fd00::5'), { host: 'fd00::5', proto: 'icmp' });
});

t.test('hostile or malformed DEST: refused with the valid form, never passed on', async (t) => {
  for (const bad of [
    '',
    'db:0',
    'db:70000',
    'db:80/sctp',
    'db/tcp',
    '10.1.0.5:80/icmp',
    'db;rm -rf /',
    'db,actions=drop',
    'db\nX',
    'db 80',
    '999.1.1.1',
    'fd00::5]:80',
    `${'a'.repeat(400)}`,
    'nw_dst=1.2.3.4,actions=output:1',
    '-ofoo',
  ]) {
    t.throws(() => parseDestination(bad), /expected DEST\[:PORT\]\[\/tcp\|udp\|icmp\]/, JSON.stringify(bad));
  }
});

t.test('plain switching: the base rule, delivered to the learned port', async (t) => {
  const tr = parseTrace(fixture('trace-normal.txt'), names);
  t.equal(tr.steps.length, 1);
  t.equal(tr.datapathActions, '6');
  const o = outcomeOf(tr, names);
  t.same([o.kind, o.ports], ['delivered', ['vt1']]);
});

t.test("a drop under enable_icc=false's cookie: dropped, and the option named", async (t) => {
  const tr = parseTrace(fixture('trace-icc-drop.txt'), names);
  const o = outcomeOf(tr, names);
  t.equal(o.kind, 'dropped');
  t.equal(o.detail, 'dropped: enable_icc=false on network app');
  t.equal(tr.steps[0]?.priority, 450);
});

t.test('a VIP: conntrack, then the select group; load-balanced', async (t) => {
  const tr = parseTrace(fixture('trace-vip.txt'), names);
  t.same(
    tr.steps.map((s) => s.table),
    [0, 50, 51],
  );
  t.match(tr.steps[2]?.meaning ?? '', /^load-balanced: a new connection to a swarm service's VIP/);
  t.equal(outcomeOf(tr, names).kind, 'load-balanced');
  t.equal(tr.fields.reg10, '0xa5a0006', "the last stage's registers");
});

t.test('a VIP without tasks: refused by ovsnet (the controller action)', async (t) => {
  const tr = parseTrace(fixture('trace-vip-refused.txt'), names);
  const o = outcomeOf(tr, names);
  t.equal(o.kind, 'refused');
  t.match(tr.steps.at(-1)?.meaning ?? '', /refused: the VIP's service has no task/);
});

t.test('garbage in: no step, no throw', async (t) => {
  for (const text of ['', 'x'.repeat(10_000), ' 0. , priority x', 'Datapath actions: 99999', '\u0000\n\n 3. priority 1, cookie 0xzz']) {
    const tr = parseTrace(text, names);
    t.doesNotThrow(() => outcomeOf(tr, names));
  }
});
