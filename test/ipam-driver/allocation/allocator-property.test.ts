/**
 * Property (fast-check): after any sequence of keyed requests (repeated, concurrent), explicit
 * ones, anonymous ones, releases by holder and Docker's releases, in a sticky pool or not:
 * no address is held by two keys and no key holds two addresses, a repeated request of a key
 * that holds an address answers that address and never moves the count, a release by a
 * non-holder moves nothing, and the count equals the reservations in the store.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import t from 'tap';
import { holders } from '../../../src/ipam-driver/state/holder-keys.js';
import type { Reservation } from '../../../src/ipam-driver/state/records.js';
import { keys } from '../../../src/store/keys.js';
import { SqliteStore } from '../../../src/store/sqlite/sqlite.js';
import { makeIpam, pool } from '../../helpers/ipam.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ovsnet-keyed-prop-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Keys: CNI attachments and Docker containers with names (dockerd 29+). */
const KEYS = [0, 1, 2, 3].map((i) => holders.cni(`c${i}`, 'eth0')).concat(['a', 'b', 'c'].map((n) => `name:${n}`));
const plain = (a: string) => a.split('/')[0] ?? '';

type Op =
  | { op: 'request'; key: number; copies: number }
  | { op: 'static'; key: number; offset: number }
  | { op: 'anonymous' }
  | { op: 'releaseHolder'; key: number }
  | { op: 'dockerRelease'; offset: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({ op: fc.constant('request' as const), key: fc.nat(KEYS.length - 1), copies: fc.integer({ min: 1, max: 3 }) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('static' as const), key: fc.nat(KEYS.length - 1), offset: fc.integer({ min: 2, max: 14 }) }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('anonymous' as const) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('releaseHolder' as const), key: fc.nat(KEYS.length - 1) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('dockerRelease' as const), offset: fc.integer({ min: 2, max: 14 }) }) },
);

let run = 0;

t.test('keyed allocation: one key, one address; one address, one key; repeats never move the count', async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.boolean(), fc.array(opArb, { minLength: 1, maxLength: 40 }), async (sticky, ops) => {
      const store = new SqliteStore({ file: path.join(dir, `k${run++}.db`) });
      const ipam = makeIpam(store);
      try {
        const { poolId } = await ipam.requestPool({ ...pool('10.81.0.0/28'), options: sticky ? { 'ovsnet.sticky': 'true' } : {} });
        await ipam.requestAddress({ poolId, address: '', gateway: true });
        const records = async () => (await store.list(keys.addresses(poolId))).kvs.map((kv) => JSON.parse(kv.value) as Reservation);
        const count = async () => Number((await store.get(keys.poolCount(poolId)))?.value ?? '0');
        /** The holder key as the request gives it, and how the store records it. */
        const request = (k: number, address = '') => {
          const key = KEYS[k] ?? '';
          const more = key.startsWith('name:') ? { name: key.slice(5) } : { holder: key };
          return ipam.requestAddress({ poolId, address, gateway: false, ...more });
        };
        const stored = (k: number) => {
          const key = KEYS[k] ?? '';
          return key.startsWith('name:') ? holders.dockerName('test-host', key.slice(5)) : key;
        };
        const heldBy = async (k: number) => (await records()).filter((r) => r.holder === stored(k)).map((r) => r.address);
        for (const o of ops) {
          const before = await count();
          switch (o.op) {
            case 'request': {
              const had = await heldBy(o.key);
              const answers = await Promise.all(
                Array.from({ length: o.copies }, () =>
                  request(o.key).then(
                    (a) => plain(a.address),
                    (e: { code?: string }) => e.code ?? 'error',
                  ),
                ),
              );
              if (new Set(answers).size !== 1) throw new Error(`concurrent requests of one key answered ${answers.join(', ')}`);
              const answer = answers[0] ?? '';
              if (had.length === 1) {
                if (answer !== had[0]) throw new Error(`${KEYS[o.key] ?? ''} holds ${had[0] ?? ''} but was given ${answer}`);
                if ((await count()) !== before) throw new Error('a repeated request moved the count');
              } else if (answer === 'IPAM_POOL_EXHAUSTED') {
                if (before < 14) throw new Error(`exhausted with ${before} of 14 reserved`);
              } else if ((await count()) !== before + 1) throw new Error('a new key moved the count by other than one');
              break;
            }
            case 'static': {
              const res = await request(o.key, `10.81.0.${o.offset}`).catch((e: { code?: string }) => e.code ?? 'error');
              if (typeof res !== 'string' && plain(res.address) !== `10.81.0.${o.offset}`) throw new Error('another address than asked');
              if (typeof res === 'string' && res !== 'IPAM_ADDRESS_TAKEN') throw new Error(`static request failed: ${res}`);
              break;
            }
            case 'anonymous':
              await ipam.requestAddress({ poolId, address: '', gateway: false }).catch((e: { code?: string }) => {
                if (e.code !== 'IPAM_POOL_EXHAUSTED') throw e;
              });
              break;
            case 'releaseHolder': {
              const had = await heldBy(o.key);
              if (KEYS[o.key]?.startsWith('name:') === true) {
                for (const a of had) await ipam.releaseAddress(poolId, a);
              } else await ipam.releaseHolder(KEYS[o.key] ?? '');
              if ((await count()) !== before - had.length) throw new Error('a holder release freed other than what it held');
              break;
            }
            case 'dockerRelease': {
              const address = `10.81.0.${o.offset}`;
              const r = (await records()).find((x) => x.address === address);
              await ipam.releaseAddress(poolId, address);
              const cni = r?.holder?.startsWith('cni/') === true;
              const expected = r === undefined || cni ? before : before - 1;
              if ((await count()) !== expected)
                throw new Error(`Docker's release of ${address} (${r?.holder ?? 'free'}) moved the count wrong`);
              break;
            }
          }
          const all = await records();
          if ((await count()) !== all.length) throw new Error(`count ${await count()} but ${all.length} reservations`);
          const byHolder = new Map<string, string[]>();
          for (const r of all) byHolder.set(r.holder ?? '', [...(byHolder.get(r.holder ?? '') ?? []), r.address]);
          for (const [holder, list] of byHolder) if (list.length > 1) throw new Error(`${holder} holds ${list.join(', ')}`);
        }
      } finally {
        await ipam.stop();
        await store.close();
      }
    }),
    { numRuns: 60 },
  );
  t.pass('60 sequences of up to 40 operations, sticky and not');
});
