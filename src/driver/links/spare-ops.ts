/**
 * Spare veth pairs over netlink (the link worker's side of endpoint/spares.ts). Deleting a veth
 * costs an RCU grace period under the kernel's RTNL lock (~20 ms), and the next Join's create
 * waits behind it; renaming a pair that is down holds no grace period. So a released pair is
 * parked (both ends down and renamed to a spare slot's names, the host end carrying the spare
 * alias instead of an endpoint's) and adopted by a later Join (renamed to that endpoint's names,
 * its MTU, MAC and alias set, the host end up), instead of deleted and created.
 * What a pair keeps across reuse: the host end's isolation from the IP stack (host-end.ts: set
 * on the device, not the name), and the container end's offloads (set again on adoption). What
 * a container left on its end (addresses, routes, per-device sysctls) went when Docker moved it
 * back out of the container's namespace, as for any interface changing namespace.
 */
import type { RtNetlinkSocket } from 'netlink';

/** A spare slot's link names. */
export interface SpareNames {
  readonly host: string;
  readonly container: string;
}

/** The kernel's answer as text ("Request rejected: ENODEV"), for errors. */
const textOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

const peerIndex = (link: Buffer | undefined) => (link === undefined || link.length < 4 ? undefined : link.readUInt32LE(0));

export class SpareStepError extends Error {
  constructor(
    readonly what: string,
    readonly detail: string,
  ) {
    super(`cannot ${what}: ${detail}`);
  }
}

async function step<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw new SpareStepError(what, textOf(err));
  }
}

/** Both ends of a pair by name, when they are each other's peer in this namespace; else undefined. */
async function pairOf(rtnl: RtNetlinkSocket, host: string, container: string): Promise<{ host: number; container: number } | undefined> {
  const get = (name: string) =>
    rtnl.getLink({}, { ifname: name }).then(
      ([l]) => l,
      () => undefined,
    );
  const [h, c] = await Promise.all([get(host), get(container)]);
  const hi = h?.data.index;
  const ci = c?.data.index;
  if (hi === undefined || ci === undefined || peerIndex(h?.attrs.link) !== ci || peerIndex(c?.attrs.link) !== hi) return undefined;
  return { host: hi, container: ci };
}

/**
 * Parks the pair `host`/`container` as `spare`: both ends down, renamed, the host end carrying
 * `alias`. False (nothing changed) when the two are not a pair here (the container end is gone,
 * or still in a namespace): the caller deletes the host end as before. A failed step deletes
 * the pair and throws.
 */
export async function parkVeth(rtnl: RtNetlinkSocket, host: string, container: string, spare: SpareNames, alias: string): Promise<boolean> {
  const pair = await pairOf(rtnl, host, container);
  if (pair === undefined) return false;
  try {
    // A rename needs the link down; the kernel renames before it applies flags, so down first.
    const down = { flags: {}, change: { up: true } } as const;
    await step(`set ${host} down`, () => rtnl.setLink({ index: pair.host, ...down }));
    await step(`rename ${host} to ${spare.host}`, () => rtnl.setLink({ index: pair.host }, { ifname: spare.host, ifalias: alias }));
    await step(`set ${container} down`, () => rtnl.setLink({ index: pair.container, ...down }));
    await step(`rename ${container} to ${spare.container}`, () => rtnl.setLink({ index: pair.container }, { ifname: spare.container }));
  } catch (err) {
    await rtnl.delLink({ index: pair.host }).catch(() => undefined);
    throw err;
  }
  return true;
}

/** What adoption sets on the pair: the endpoint's names, MTU, container MAC and host alias. */
export interface AdoptSpec {
  readonly host: string;
  readonly container: string;
  readonly mtu: number;
  readonly mac?: string;
  readonly alias?: string;
}

/**
 * Renames the spare pair to `spec`'s names, sets the MTU on both ends, the MAC on the container
 * end, the alias on the host end and brings the host end up (one message per end). Fails, the
 * pair deleted, when the spare is not a pair any more or a step fails: the caller creates anew.
 */
export async function adoptVeth(rtnl: RtNetlinkSocket, spare: SpareNames, spec: AdoptSpec): Promise<void> {
  const pair = await pairOf(rtnl, spare.host, spare.container);
  if (pair === undefined) {
    await rtnl.delLink({}, { ifname: spare.host }).catch(() => undefined);
    throw new SpareStepError(`adopt spare veth ${spare.host}`, 'it is no longer a veth pair');
  }
  try {
    const mac = spec.mac === undefined ? {} : { address: Buffer.from(spec.mac.split(':').map((h) => parseInt(h, 16))) };
    await step(`rename ${spare.container} to ${spec.container}`, () =>
      rtnl.setLink({ index: pair.container }, { ifname: spec.container, mtu: spec.mtu, ...mac }),
    );
    const alias = spec.alias === undefined ? {} : { ifalias: spec.alias };
    const up = { flags: { up: true, noarp: true }, change: { up: true, noarp: true } } as const;
    await step(`rename ${spare.host} to ${spec.host}`, () =>
      rtnl.setLink({ index: pair.host, ...up }, { ifname: spec.host, mtu: spec.mtu, ...alias }),
    );
  } catch (err) {
    await rtnl.delLink({ index: pair.host }).catch(() => undefined);
    throw err;
  }
}
