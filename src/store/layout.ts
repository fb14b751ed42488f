/**
 * The store's layout version, for safe upgrades. Keys live under a versioned prefix
 * (/ovsnet/v1/, keys.ts); which layout a store holds is said by one key outside it,
 * /ovsnet/layout, so that a daemon of an older layout, which would see an empty /ovsnet/v1/ in a
 * store already moved to /ovsnet/v2/, refuses to start instead of handing out addresses again.
 *
 * Layout 1 is every version up to the one that moved logical network members to keys of their
 * own: 0.1.0 wrote no layout key, and what later versions added (key families for keyed IPAM,
 * sticky keys, CNI attachments, uplink VLAN tags; optional record fields) are additions an older
 * reader never misreads. A store without the key is layout 1.
 * Layout 2: a logical network's members are keys of their own, no longer inside its record,
 * which a layout-1 daemon would read as a network with no member. Its upgrade (given by the
 * composition root: the records' owner moves them) runs before the key says 2; it is idempotent,
 * so two daemons starting at once may both run it. A change that older versions would misread
 * bumps LAYOUT_VERSION again and adds its step to that upgrade.
 */
import { OvsnetError } from '../lib/errors.js';
import { keepTrying } from '../lib/timers.js';
import { VERSION } from '../lib/version.js';
import type { Store } from './types.js';

export const LAYOUT_VERSION = 2;
export const LAYOUT_KEY = '/ovsnet/layout';

interface LayoutRecord {
  readonly layout: number;
  /** The ovsnet version that wrote the record (for the message of a refusal). */
  readonly writtenBy: string;
}

function parse(value: string): LayoutRecord {
  let record: unknown;
  try {
    record = JSON.parse(value);
  } catch {
    record = undefined;
  }
  const r = record as Partial<LayoutRecord> | undefined;
  if (typeof r !== 'object' || r === null || !Number.isInteger(r.layout) || (r.layout ?? 0) < 1) {
    throw new OvsnetError(
      'STORE_RECORD_INVALID',
      `the store's layout record ${LAYOUT_KEY} is ${JSON.stringify(value)}: expected {"layout": N, "writtenBy": "VERSION"} with N a whole number from 1`,
    );
  }
  return { layout: r.layout as number, writtenBy: typeof r.writtenBy === 'string' ? r.writtenBy : 'an unknown version' };
}

/** Brings a store of an older layout (`from`) to this one's; idempotent. */
export type Upgrade = (from: number) => Promise<void>;

/**
 * Checks the layout of the store: upgrades an older one (or one without the key) and then writes
 * this version's (atomically: two daemons starting on one etcd write it once), refuses one newer
 * than this version reads. Returns what the store held before (undefined: no layout key, a
 * 0.1.0 store or a new one).
 */
export async function checkLayout(store: Store, upgrade: Upgrade): Promise<number | undefined> {
  const held = await store.get(LAYOUT_KEY);
  const found = held === undefined ? undefined : parse(held.value);
  if (found !== undefined && found.layout < LAYOUT_VERSION) return upgraded(store, upgrade, held?.modRevision, found.layout);
  if (found === undefined) return upgraded(store, upgrade, undefined, undefined);
  if (found.layout > LAYOUT_VERSION) {
    throw new OvsnetError(
      'STORE_LAYOUT_NEWER',
      `the store holds state of layout ${found.layout} (written by ovsnet ${found.writtenBy}); ovsnet ${VERSION} reads layout ${LAYOUT_VERSION} only: ` +
        `run ovsnet ${found.writtenBy} or later on this store (a downgrade across a layout change is not supported), or point OVSNET_STORE at another store`,
    );
  }
  return found.layout;
}

/** Upgrades a store of layout `from` (undefined: no key, layout 1) and writes this layout's key. */
async function upgraded(
  store: Store,
  upgrade: Upgrade,
  modRevision: number | undefined,
  from: number | undefined,
): Promise<number | undefined> {
  await upgrade(from ?? 1);
  const ours = JSON.stringify({ layout: LAYOUT_VERSION, writtenBy: VERSION } satisfies LayoutRecord);
  const res = await store.txn({
    compares: [
      modRevision === undefined ? { key: LAYOUT_KEY, target: 'absent' } : { key: LAYOUT_KEY, target: 'modRevision', op: '==', modRevision },
    ],
    success: [{ type: 'put', key: LAYOUT_KEY, value: ours }],
  });
  return res.succeeded ? from : checkLayout(store, upgrade); // written meanwhile: look again
}

/**
 * Checks the layout once the store answers (retried like every background task while it does
 * not), before the daemon's background work reads or writes it: resolves true when that work
 * may start; false when the layout is refused (`refuse` has been called with why) or the daemon
 * stops first.
 */
export async function layoutChecked(
  store: Store,
  refuse: (err: unknown) => void,
  o: { readonly signal: AbortSignal; readonly onFailure: (err: unknown) => void; readonly upgrade: Upgrade },
): Promise<boolean> {
  let refused = false;
  const ok = await keepTrying(
    () =>
      checkLayout(store, o.upgrade).catch((err: unknown) => {
        if (!(err instanceof OvsnetError) || (err.code !== 'STORE_LAYOUT_NEWER' && err.code !== 'STORE_RECORD_INVALID')) throw err;
        refused = true;
        refuse(err);
      }),
    o,
  );
  return ok && !refused;
}
