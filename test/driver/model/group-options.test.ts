/** Endpoint groups' options: parsing, refusals, and allows resolved to tags (pure). */
import t from 'tap';
import { parseGroupOptions, resolveAllows } from '../../../src/driver/model/group-options.js';

const parse = (o: Record<string, string>) => parseGroupOptions((k) => o[k]);

t.test('a group names its parent; allows parse with optional ports', async (t) => {
  t.same(parse({}), { group: undefined, parent: undefined, allow: [] }, 'no group');
  t.same(parse({ 'ovsnet.network': 'shop', 'ovsnet.encap': 'vxlan' }), { group: undefined, parent: 'shop', allow: [] }, 'a parent');
  t.same(parse({ 'ovsnet.network': 'shop', 'ovsnet.group': 'web', 'ovsnet.allow': 'db:5432/tcp, api,dns:53/udp' }), {
    group: 'web',
    parent: 'shop',
    allow: [{ group: 'db', port: { number: 5432, proto: 'tcp' } }, { group: 'api' }, { group: 'dns', port: { number: 53, proto: 'udp' } }],
  });
  t.same(parse({ 'ovsnet.network': 'shop', 'ovsnet.allow': 'web' }).allow, [{ group: 'web' }], 'the parent allows a group in');
});

t.test('refusals say what was wrong and what is valid', async (t) => {
  const refused = (o: Record<string, string>, message: RegExp) =>
    t.throws(() => parse(o), { code: 'NETWORK_OPTION_INVALID', message }, JSON.stringify(o));
  refused({ 'ovsnet.group': 'web' }, /ovsnet.group=web needs -o ovsnet.network=PARENT/);
  refused({ 'ovsnet.group': 'we b', 'ovsnet.network': 'shop' }, /ovsnet.group=we b is not valid: expected .*1-64 letters/);
  refused({ 'ovsnet.group': 'shop', 'ovsnet.network': 'shop' }, /the parent's own name/);
  refused({ 'ovsnet.allow': 'db' }, /ovsnet.allow=db applies to a network with groups: add -o ovsnet.network=PARENT/);
  refused({ 'ovsnet.network': 'shop', 'ovsnet.group': 'web', 'ovsnet.allow': 'db:80' }, /at "db:80": expected GROUP or GROUP:PORT\/tcp/);
  refused({ 'ovsnet.network': 'shop', 'ovsnet.group': 'web', 'ovsnet.allow': 'db:70000/tcp' }, /PORT 1-65535/);
  refused({ 'ovsnet.network': 'shop', 'ovsnet.group': 'web', 'ovsnet.allow': 'db:80/sctp' }, /at "db:80\/sctp"/);
  refused({ 'ovsnet.network': 'shop', 'ovsnet.group': 'web', 'ovsnet.allow': 'db,' }, /at ""/);
  refused({ 'ovsnet.network': 'shop', 'ovsnet.group': 'web', 'ovsnet.allow': 'web' }, /names this network itself \(web\)/);
});

t.test('allows resolve to tags; names no group has are returned, not dropped silently', async (t) => {
  const tags = new Map([
    ['shop', 10],
    ['db', 12],
  ]);
  t.same(resolveAllows(11, [{ group: 'db', port: { number: 5432, proto: 'tcp' } }, { group: 'shop' }, { group: 'cache' }], tags), {
    allows: [
      { to: 11, from: 12, port: { number: 5432, proto: 'tcp' } },
      { to: 11, from: 10 },
    ],
    unknown: ['cache'],
  });
});
