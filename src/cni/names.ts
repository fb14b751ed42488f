/**
 * The CNI spec's rules for the names a runtime gives (pure, imports nothing): a container ID is
 * alphanumeric first, then alphanumerics, "_", "." or "-"; an interface name is what the kernel
 * takes (at most 15 bytes, not "." or "..", no "/", ":" or whitespace; ovsnet also keeps it to
 * ASCII letters, digits, "_", "." and "-"). Shared by the CNI requests and `ipam adopt host-local`.
 */

/** Longest container ID taken: runtimes give 64 hex digits; the bound keeps store keys small. */
export const CONTAINER_ID_MAX = 256;

/** What is wrong with a container ID, or undefined when the spec allows it. */
export function containerIdProblem(id: string): string | undefined {
  if (id.length > CONTAINER_ID_MAX) return `is ${id.length} characters long: at most ${CONTAINER_ID_MAX}`;
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(id))
    return 'is not a container ID: a letter or digit, then letters, digits, "_", "." or "-" (CNI spec)';
  return undefined;
}

/** What is wrong with an interface name, or undefined when the kernel and the spec take it. */
export function ifnameProblem(name: string): string | undefined {
  if (name === '.' || name === '..') return 'is not an interface name: "." and ".." are refused by the kernel';
  if (!/^[A-Za-z0-9_.-]{1,15}$/.test(name)) return 'is not an interface name: 1-15 letters, digits, "-", "_" or "."';
  return undefined;
}

/** A name quoted for a message, control characters escaped and cut to `max` characters. */
export function quoted(value: string, max = 80): string {
  return JSON.stringify(value.length > max ? `${value.slice(0, max)}...` : value);
}
