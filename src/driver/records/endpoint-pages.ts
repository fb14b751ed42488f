/**
 * Every endpoint record in the store, read a page at a time and kept only as `pick` makes of
 * each: for the periodic readers of every record (the reaper's sweep), which need a few fields
 * of each. listEndpoints() holds every record's text and object at once; 10k endpoints are tens
 * of MiB, and while their reader awaits, V8 moves them to its old generation, which then grows
 * by that much on every sweep until a full collection. A page's texts and records die with the
 * page; what is kept is what `pick` returns.
 *
 * The pages are not one snapshot: a record written or deleted during the read may be seen or
 * not. Callers judge over several reads (the reaper's grace period), never on one.
 */
import { decodeAll, decodeRecord } from '../../store/decode.js';
import { keys } from '../../store/keys.js';
import type { Store } from '../../store/types.js';
import type { EndpointRecord } from '../model/records.js';

/** Records per page: a few hundred KiB of text, within V8's young generation under the plugin's flags. */
export const ENDPOINT_PAGE = 250;

export async function pickEndpoints<T>(
  store: Pick<Store, 'range'>,
  pick: (record: EndpointRecord) => T,
  limit = ENDPOINT_PAGE,
): Promise<T[]> {
  const out: T[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await store.range(keys.allEndpoints, after === undefined ? { limit } : { limit, after });
    for (const record of decodeAll(page.kvs, (kv) => decodeRecord<EndpointRecord>(kv.key, kv.value))) out.push(pick(record));
    const last = page.kvs[page.kvs.length - 1];
    if (!page.more || last === undefined) return out;
    after = last.key;
  }
}
