/**
 * A link step the kernel (or the link worker) refused, with the kernel's errno when its answer
 * named one: what lets a caller tell a name held by another link (EEXIST) from other failures.
 */
import { OvsnetError } from '../../lib/errors.js';

/** The errno of a netlink rejection; the package only gives it as text ("Request rejected: ENODEV"). */
export function errnoOf(text: string): string | undefined {
  return /Request rejected: (E[A-Z]+|-?\d+)/.exec(text)?.[1];
}

export class LinkError extends OvsnetError {
  readonly errno: string | undefined;

  constructor(what: string, detail: string) {
    super('LINK_FAILED', `cannot ${what}: ${detail}`);
    this.errno = errnoOf(detail);
  }
}

/** True when `err` is a link step refused because a link of that name exists already. */
export const nameTaken = (err: unknown): boolean => err instanceof LinkError && err.errno === 'EEXIST';
