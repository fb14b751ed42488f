/**
 * This process's copy of the network and endpoint records that Docker's per-container calls
 * read (CreateEndpoint, Join, ProgramExternalConnectivity, EndpointOperInfo twice): eight store
 * reads per container, each a round trip to etcd. These records are written only by this host's
 * driver (records carry the host; one ovsnet serves a host), so a copy taken from the store or
 * from the driver's own write stays true until the driver itself changes the key, and it says
 * so here: forget() before the store write (an unconfirmed write leaves no copy behind), set()
 * after it succeeded. A read that overlapped any change is not kept.
 *
 * The copy is compact: one string per record (a codec's packed form, endpoint-pack.ts), under
 * the last part of its key in a map per parent key, rather than the object graph JSON.parse
 * makes of a record under its whole key (10k endpoints on a host are 10k copies). The last
 * HOT_LIMIT records read are kept unpacked as well, deeply frozen: a container's calls read the
 * same network and endpoint again and again (a start's five reads unpacked each anew: about a
 * fifth of ovsnet's own functions' time on the main thread in a storm's profile), and a frozen record can be handed to every caller, none
 * able to change it for the others (the record types are readonly; freezing holds it at run time too).
 */

/** A record's compact form and back; unpack(key, pack(key, r)) equals r. */
export interface RecordCodec<T> {
  pack(key: string, record: T): string;
  unpack(key: string, packed: string): T;
}

/** The codec of records with no compact form of their own: their JSON text. */
export const jsonCodec = <T>(): RecordCodec<T> => ({
  pack: (_key, record) => JSON.stringify(record),
  unpack: (_key, packed) => JSON.parse(packed) as T,
});

/** `/a/b/c` -> [`/a/b/`, `c`]. */
const split = (key: string): [string, string] => {
  const at = key.lastIndexOf('/') + 1;
  return [key.slice(0, at), key.slice(at)];
};

/**
 * A string of its own: V8 makes a slice of 13 characters or more a view that holds the whole
 * string it was cut from (a kept leaf would hold its full key); JSON's round trip copies it.
 */
const own = (s: string): string => JSON.parse(JSON.stringify(s)) as string;

/** How many records read lately are kept unpacked (a host's containers starting at once each read a few). */
export const HOT_LIMIT = 256;

/** `value` and everything in it frozen; plain JSON data only (records are). */
function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  for (const inner of Object.values(value)) deepFreeze(inner);
  return Object.freeze(value);
}

export class RecordCache<T> {
  /** Parent key -> last part of the key -> packed record. */
  private readonly parents = new Map<string, Map<string, string>>();
  /** Whole key -> the record unpacked and frozen, for the last HOT_LIMIT read; oldest first. */
  private readonly hot = new Map<string, T>();
  /** Moves on every change: a read that started before one does not keep its result. */
  private generation = 0;

  /** `decode` turns a record's text (as the store holds it) into the record, or throws what is wrong with it. */
  constructor(
    private readonly decode: (key: string, text: string) => T,
    private readonly codec: RecordCodec<T> = jsonCodec<T>(),
  ) {}

  /**
   * The cached record of `key`, else the one whose text `load()` reads (kept when found, valid,
   * and nothing changed meanwhile).
   */
  async read(key: string, load: () => Promise<string | undefined>): Promise<T | undefined> {
    const warm = this.hot.get(key);
    if (warm !== undefined) return warm;
    const [parent, leaf] = split(key);
    const hit = this.parents.get(parent)?.get(leaf);
    if (hit !== undefined) return this.warm(key, this.codec.unpack(key, hit));
    const generation = this.generation;
    const text = await load();
    if (text === undefined) return undefined;
    const value = deepFreeze(this.decode(key, text));
    if (generation !== this.generation) return value;
    this.keep(key, value);
    return this.warm(key, value);
  }

  /** `record` (as written to the store) now stands at `key`. */
  set(key: string, record: T): void {
    this.generation++;
    this.hot.delete(key);
    this.keep(key, record);
  }

  forget(key: string): void {
    this.generation++;
    this.hot.delete(key);
    const [parent, leaf] = split(key);
    const leaves = this.parents.get(parent);
    leaves?.delete(leaf);
    if (leaves?.size === 0) this.parents.delete(parent);
  }

  forgetPrefix(prefix: string): void {
    this.generation++;
    for (const key of this.hot.keys()) if (key.startsWith(prefix)) this.hot.delete(key);
    for (const [parent, leaves] of this.parents) {
      if (parent.startsWith(prefix)) this.parents.delete(parent);
      else if (prefix.startsWith(parent)) {
        for (const leaf of leaves.keys()) if ((parent + leaf).startsWith(prefix)) leaves.delete(leaf);
        if (leaves.size === 0) this.parents.delete(parent);
      }
    }
  }

  /** Whether a record whose key ends in `leaf` is kept, under any parent (an endpoint by its ID alone: one look per network). */
  hasLeaf(leaf: string): boolean {
    for (const leaves of this.parents.values()) if (leaves.has(leaf)) return true;
    return false;
  }

  get size(): number {
    let n = 0;
    for (const leaves of this.parents.values()) n += leaves.size;
    return n;
  }

  /** `record` frozen and kept unpacked, the oldest such let go past HOT_LIMIT. */
  private warm(key: string, record: T): T {
    if (this.hot.size >= HOT_LIMIT) this.hot.delete(this.hot.keys().next().value as string);
    this.hot.set(key, deepFreeze(record));
    return record;
  }

  private keep(key: string, record: T): void {
    const [parent, leaf] = split(key);
    let leaves = this.parents.get(parent);
    if (leaves === undefined) this.parents.set(own(parent), (leaves = new Map<string, string>()));
    leaves.set(leaves.has(leaf) ? leaf : own(leaf), this.codec.pack(key, record));
  }
}
