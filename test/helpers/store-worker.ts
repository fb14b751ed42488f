/**
 * A child process for multi-process store tests.
 *   node store-worker.js cas   <OVSNET_STORE> <key> <n>   n compare-and-swap increments of key
 *   node store-worker.js crash <OVSNET_STORE> <prefix> <n> n two-key transactions, "ack i" after each
 */
import { loadConfig } from '../../src/config/config.js';
import { openStore } from '../../src/store/open.js';
import { absent, modRevisionIs, put } from '../../src/store/types.js';

const [mode, spec, key, nArg] = process.argv.slice(2);
if (mode === undefined || spec === undefined || key === undefined || nArg === undefined) {
  throw new Error('usage: store-worker cas|crash <OVSNET_STORE> <key> <n>');
}
const config = loadConfig({ OVSNET_STORE: spec });
const store = openStore(config.store, 5000);
const n = Number(nArg);

if (mode === 'cas') {
  let conflicts = 0;
  for (let done = 0; done < n; ) {
    const kv = await store.get(key);
    const next = String(Number(kv?.value ?? '0') + 1);
    const ok = await store.txn({
      compares: [kv === undefined ? absent(key) : modRevisionIs(key, kv.modRevision)],
      success: [put(key, next)],
    });
    if (ok.succeeded) done++;
    else conflicts++;
  }
  process.stdout.write(`conflicts ${conflicts}\n`);
} else if (mode === 'crash') {
  for (let i = 0; i < n; i++) {
    // Two keys and a counter in one transaction: after a crash, all three or none.
    await store.txn({
      compares: [],
      success: [put(`${key}a/${i}`, String(i)), put(`${key}b/${i}`, String(i)), put(`${key}count`, String(i + 1))],
    });
    process.stdout.write(`ack ${i}\n`);
  }
}
await store.close();
