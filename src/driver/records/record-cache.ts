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
 * makes of a record under its whole key (10k endpoints on a host are 10k copies). Every hit
 * unpacks a fresh object: no caller shares, or can change, the copy.
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

export class RecordCache<T> {
  /** Parent key -> last part of the key -> packed record. */
  private readonly parents = new Map<string, Map<string, string>>();
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
    const [parent, leaf] = split(key);
    const hit = this.parents.get(parent)?.get(leaf);
    if (hit !== undefined) return this.codec.unpack(key, hit);
    const generation = this.generation;
    const text = await load();
    if (text === undefined) return undefined;
    const value = this.decode(key, text);
    if (generation === this.generation) this.keep(key, value);
    return value;
  }

  /** `record` (as written to the store) now stands at `key`. */
  set(key: string, record: T): void {
    this.generation++;
    this.keep(key, record);
  }

  forget(key: string): void {
    this.generation++;
    const [parent, leaf] = split(key);
    const leaves = this.parents.get(parent);
    leaves?.delete(leaf);
    if (leaves?.size === 0) this.parents.delete(parent);
  }

  forgetPrefix(prefix: string): void {
    this.generation++;
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

  private keep(key: string, record: T): void {
    const [parent, leaf] = split(key);
    let leaves = this.parents.get(parent);
    if (leaves === undefined) this.parents.set(own(parent), (leaves = new Map<string, string>()));
    leaves.set(leaves.has(leaf) ? leaf : own(leaf), this.codec.pack(key, record));
  }
}
