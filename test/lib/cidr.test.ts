import t from 'tap';
import { Address4 } from 'ip-address';
import {
  contains,
  defaultGateway,
  formatAddress,
  formatPrefix,
  overlaps,
  PARSED_LIMIT,
  parseAddress,
  parseCidr,
  prefix,
  size,
  subnetAt,
  subnetCount,
  usableBounds,
} from '../../src/lib/cidr.js';

t.test('parse and format, both families', async (t) => {
  t.equal(formatPrefix(prefix('10.55.0.0/24')), '10.55.0.0/24');
  t.equal(formatPrefix(prefix('10.55.0.77/24')), '10.55.0.0/24', 'host bits cleared');
  t.equal(parseCidr('10.55.0.77/24').address, parseAddress('10.55.0.77').value);
  t.equal(formatPrefix(prefix('FD00:0055:0000::/64')), 'fd00:55::/64', 'RFC 5952 form');
  t.equal(formatAddress(6, parseAddress('fd00:55::1').value), 'fd00:55::1');
  t.equal(formatPrefix(prefix('0.0.0.0/0')), '0.0.0.0/0');
  for (const bad of ['10.0.0.0', '10.0.0.0/33', 'fd00::/129', '10.0.0.256/24', 'x/24', '/24', '10.0.0.0/-1', '10.0.0.0/24/1']) {
    t.throws(() => parseCidr(bad), { message: /not a CIDR|prefix length/ }, bad);
  }
  t.throws(() => parseAddress('10.0.0.0/24'), { message: /not an IP address/ });
  t.throws(() => parseAddress('1.2.3'), { message: /not an IP address/ });
});

t.test('IPv4 read directly gives what ip-address gives, for every form it is given', async (t) => {
  const slow = (text: string): bigint | 'refused' => {
    const a = text.trim();
    return /^\d+\.\d+\.\d+\.\d+$/.test(a) && Address4.isValid(a) ? new Address4(a).bigInt() : 'refused';
  };
  const fast = (text: string): bigint | 'refused' => {
    try {
      const p = parseAddress(text);
      return p.family === 4 ? p.value : 'refused';
    } catch {
      return 'refused';
    }
  };
  const forms = [
    '0.0.0.0',
    '255.255.255.255',
    '10.0.0.1',
    ' 10.0.0.1 ',
    '01.2.3.4',
    '1.2.3.256',
    '1.2.3.4.5',
    '1.2.3',
    '-1.2.3.4',
    '1.2.3.4/32',
    '１.2.3.4',
  ];
  let seed = 7;
  const octet = () => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 16) % 300; // up to 299: some invalid
  for (let i = 0; i < 20_000; i++)
    forms.push([octet(), octet(), octet(), octet()].map((o) => (i % 7 === 0 ? `0${o}` : String(o))).join('.'));
  const differ = forms.filter((f) => fast(f) !== slow(f));
  t.same(differ, [], 'no form read otherwise');
  t.equal(fast('10.1.2.3'), 0x0a010203n);
  t.equal(fast('255.255.255.255'), 0xffffffffn, 'the top bit does not make it negative');
});

t.test('sizes, containment and overlap', async (t) => {
  t.equal(size(prefix('10.0.0.0/24')), 256n);
  t.equal(size(prefix('fd00::/64')), 1n << 64n);
  t.ok(contains(prefix('10.0.0.0/16'), prefix('10.0.5.0/24')));
  t.notOk(contains(prefix('10.0.5.0/24'), prefix('10.0.0.0/16')));
  t.notOk(contains(prefix('10.0.0.0/16'), prefix('fd00::/64')), 'families never contain each other');
  t.ok(overlaps(prefix('10.0.0.0/16'), prefix('10.0.255.0/24')));
  t.notOk(overlaps(prefix('10.0.0.0/24'), prefix('10.0.1.0/24')));
  t.notOk(overlaps(prefix('0.0.0.0/0'), prefix('::/0')));
});

t.test('usable bounds: never network or IPv4 broadcast; /31, /32 keep all', async (t) => {
  const b = (pool: string, range = pool) => {
    const u = usableBounds(prefix(pool), prefix(range));
    return u === undefined ? undefined : [formatAddress(prefix(pool).family, u.first), formatAddress(prefix(pool).family, u.last)];
  };
  t.same(b('10.0.0.0/24'), ['10.0.0.1', '10.0.0.254']);
  t.same(b('10.0.0.0/30'), ['10.0.0.1', '10.0.0.2']);
  t.same(b('10.0.0.0/31'), ['10.0.0.0', '10.0.0.1']);
  t.same(b('10.0.0.5/32'), ['10.0.0.5', '10.0.0.5']);
  t.same(b('10.0.0.0/24', '10.0.0.128/25'), ['10.0.0.128', '10.0.0.254'], 'a range at the top loses the broadcast');
  t.same(b('10.0.0.0/24', '10.0.0.0/25'), ['10.0.0.1', '10.0.0.127']);
  t.same(b('fd00::/64'), ['fd00::1', 'fd00::ffff:ffff:ffff:ffff'], 'IPv6 has no broadcast');
  // Exhaustively: for every IPv4 length, the usable count is 2^h - 2 for h >= 2, else 2^h.
  for (let bits = 0; bits <= 32; bits++) {
    const p = prefix(`10.0.0.0/${bits}`.replace(/^10\.0\.0\.0\/([0-7])$/, '0.0.0.0/$1'));
    const u = usableBounds(p, p);
    const h = 32 - bits;
    t.equal(u === undefined ? 0n : u.last - u.first + 1n, h >= 2 ? (1n << BigInt(h)) - 2n : 1n << BigInt(h), `/${bits}`);
  }
});

t.test('gateway: first address plus one', async (t) => {
  t.equal(formatAddress(4, defaultGateway(prefix('10.55.0.0/24'))), '10.55.0.1');
  t.equal(formatAddress(6, defaultGateway(prefix('fd00:55::/64'))), 'fd00:55::1');
  t.equal(formatAddress(4, defaultGateway(prefix('10.0.0.7/32'))), '10.0.0.7');
});

t.test('subnets of a range', async (t) => {
  const r = prefix('10.192.0.0/10');
  t.equal(subnetCount(r, 24), 1n << 14n);
  t.equal(formatPrefix(subnetAt(r, 24, 0n)), '10.192.0.0/24');
  t.equal(formatPrefix(subnetAt(r, 24, 257n)), '10.193.1.0/24');
  t.equal(formatPrefix(subnetAt(prefix('fd5e:e00::/40'), 64, 1n)), 'fd5e:e00:0:1::/64');
  t.equal(subnetCount(r, 8), 0n);
});

t.test('parsed addresses are remembered by text: the same text gives the same object, another text its own parse', async (t) => {
  const a = parseAddress('10.66.0.5');
  t.equal(parseAddress('10.66.0.5'), a, 'the same object: remembered, not parsed again');
  t.ok(Object.isFrozen(a), 'shared by every caller, so frozen');
  t.throws(() => Object.assign(a, { value: 1n }), TypeError, 'no caller can change it for the others');
  t.equal(parseAddress('10.66.0.5').value, 0x0a420005n);
  // Texts of one length and one family, one after another: each its own value.
  for (let i = 0; i < 200; i++) t.equal(parseAddress(`10.66.1.${100 + (i % 100)}`).value, 0x0a420100n + BigInt(100 + (i % 100)));
  t.equal(parseAddress(' 10.66.0.5').value, a.value, 'a text with a space: its own entry, the same address');
  t.throws(() => parseAddress('10.66.0.256'), /not an IP address/, 'a text that is no address throws every time');
  t.throws(() => parseAddress('10.66.0.256'), /not an IP address/);
  // More texts than are remembered: the oldest go, every answer stays right.
  for (let i = 0; i < PARSED_LIMIT + 10; i++) parseAddress(`fd00:66::${i.toString(16)}`);
  t.equal(parseAddress('10.66.0.5').value, 0x0a420005n, 'parsed again once forgotten');
  t.equal(parseAddress('fd00:66::0').value, 0xfd000066000000000000000000000000n);
});
