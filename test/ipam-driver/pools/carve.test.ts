import t from 'tap';
import { nextPool } from '../../../src/ipam-driver/pools/carve.js';
import { formatPrefix, prefix } from '../../../src/lib/cidr.js';

const ranges = [
  { range: prefix('10.1.0.0/22'), bits: 24 },
  { range: prefix('10.9.0.0/23'), bits: 24 },
  { range: prefix('fd00::/62'), bits: 64 },
];

t.test('the first subnet that overlaps nothing, resuming at the cursor', async (t) => {
  const first = nextPool(ranges, 4, 0n, []);
  t.equal(first && formatPrefix(first.prefix), '10.1.0.0/24');
  t.equal(first?.next, 1n);
  const skip = nextPool(ranges, 4, 0n, [prefix('10.1.0.0/23'), prefix('10.1.2.128/25')]);
  t.equal(skip && formatPrefix(skip.prefix), '10.1.3.0/24', 'skips taken pools and routes, even partial overlaps');
  const second = nextPool(ranges, 4, 4n, []);
  t.equal(second && formatPrefix(second.prefix), '10.9.0.0/24', 'continues into the next range');
  const wrap = nextPool(ranges, 4, 5n, [prefix('10.9.1.0/24')]);
  t.equal(wrap && formatPrefix(wrap.prefix), '10.1.0.0/24', 'wraps around');
  const v6 = nextPool(ranges, 6, 1n, []);
  t.equal(v6 && formatPrefix(v6.prefix), 'fd00:0:0:1::/64');
  t.equal(nextPool(ranges, 4, 0n, [prefix('10.0.0.0/8')]), undefined, 'all taken');
  t.equal(nextPool([], 6, 0n, []), undefined, 'no range of the family');
});
