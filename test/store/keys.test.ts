/**
 * Key parts (src/store/keys.ts): a value holding '/' stays one part, and every part reads back
 * as the value it was made from, whether or not it held anything to escape.
 */
import t from 'tap';
import { keys, part, unpart } from '../../src/store/keys.js';

t.test('parts escape / and %, and read back as written', async (t) => {
  const cases: [string, string][] = [
    ['10.1.0.0/24', '10.1.0.0%2F24'],
    ['ab'.repeat(32), 'ab'.repeat(32)],
    ['100%', '100%25'],
    ['%2F', '%252F'],
    ['a/b%c/', 'a%2Fb%25c%2F'],
    ['', ''],
  ];
  for (const [value, escaped] of cases) {
    t.equal(part(value), escaped, JSON.stringify(value));
    t.equal(unpart(escaped), value, `${JSON.stringify(escaped)} back`);
  }
  t.equal(keys.address('10.1.0.0/24', '10.1.0.5'), '/ovsnet/v1/ipam/addresses/10.1.0.0%2F24/10.1.0.5');
});

t.test('any string round-trips and never splits a key', async (t) => {
  const alphabet = ['a', '/', '%', '2', 'F', '5', ':', '.'];
  let seed = 7;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
  const wrong: string[] = [];
  for (let i = 0; i < 2000; i++) {
    const value = Array.from({ length: next() % 12 }, () => alphabet[next() % alphabet.length]).join('');
    const p = part(value);
    if (p.includes('/') || unpart(p) !== value)
      wrong.push(`${JSON.stringify(value)} -> ${JSON.stringify(p)} -> ${JSON.stringify(unpart(p))}`);
  }
  t.same(wrong, [], '2,000 strings of / % 2 F and others');
});
