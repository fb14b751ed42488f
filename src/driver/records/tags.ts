/**
 * VLAN tags (1-4094) held by networks, claimed in the store so two networks of one host never
 * share one. Tags are per host: each host has its own bridge (VXLAN networks map their VNI to a
 * local tag), except those of VLAN networks on the uplink, the same on every host (claimed for
 * the cluster too: logical-records.ts); a tag picked here avoids them.
 */
import { OvsnetError } from '../../lib/errors.js';
import { keys } from '../../store/keys.js';
import type { Undo } from '../model/undo.js';
import { absent, del, get, put, type Store } from '../../store/types.js';

/** The tag asked for if free (or already this network's), else the lowest free one. */
export async function claimTag(store: Store, host: string, networkId: string, wanted: number | undefined): Promise<number> {
  if (wanted !== undefined) {
    const res = await store.txn({
      compares: [absent(keys.vlanTag(host, wanted))],
      success: [put(keys.vlanTag(host, wanted), networkId)],
      failure: [get(keys.vlanTag(host, wanted))],
    });
    const holder = res.gets[0]?.value;
    if (!res.succeeded && holder !== networkId) {
      throw new OvsnetError(
        'TAG_TAKEN',
        `VLAN tag ${wanted} is used by network ${holder?.slice(0, 12) ?? '?'} on this host: pick another from 1 to 4094, or omit -o ovsnet.tag`,
      );
    }
    return wanted;
  }
  for (let attempt = 0; attempt < 16; attempt++) {
    const held = [...(await store.list(keys.vlanTags(host))).kvs, ...(await store.list(keys.clusterTags('uplink-vlan'))).kvs];
    const used = new Set(held.map((kv) => Number(kv.key.split('/').pop())));
    let tag = 1;
    while (used.has(tag)) tag++;
    if (tag > 4094) throw new OvsnetError('TAGS_EXHAUSTED', 'all 4094 VLAN tags are in use: remove a network first');
    const res = await store.txn({ compares: [absent(keys.vlanTag(host, tag))], success: [put(keys.vlanTag(host, tag), networkId)] });
    if (res.succeeded) return tag;
  }
  throw new OvsnetError('TAGS_EXHAUSTED', 'VLAN tags are being claimed too fast; retry');
}

/**
 * Frees this host's VLAN tags held by none of `networkIds` (a create that failed, or whose
 * answer was lost), each only if still held by what was read. Returns the tags freed.
 */
export async function releaseOrphanTags(store: Store, host: string, networkIds: ReadonlySet<string>): Promise<string[]> {
  const freed: string[] = [];
  for (const kv of (await store.list(keys.vlanTags(host))).kvs) {
    if (networkIds.has(kv.value)) continue;
    await store.txn({ compares: [{ key: kv.key, target: 'value', op: '==', value: kv.value }], success: [del(kv.key)] });
    freed.push(kv.key.split('/').pop() ?? '?');
  }
  return freed;
}

/** Network creation's step: claimTag, with the tag's release queued in `undo`. */
export async function claimTagStep(
  store: Store,
  host: string,
  networkId: string,
  wanted: number | undefined,
  undo: Undo[],
): Promise<number> {
  const tag = await claimTag(store, host, networkId, wanted);
  undo.push(() => releaseTag(store, host, tag, networkId));
  return tag;
}

/** Frees the tag if this network holds it; idempotent. */
export async function releaseTag(store: Store, host: string, tag: number, networkId: string): Promise<void> {
  await store.txn({
    compares: [{ key: keys.vlanTag(host, tag), target: 'value', op: '==', value: networkId }],
    success: [del(keys.vlanTag(host, tag))],
  });
}
