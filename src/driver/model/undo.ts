/**
 * Creation as steps, each queueing its undo once it has acted (libnetwork's bridge driver does
 * the same): when a later step fails, what was done is undone in reverse, and an undo that
 * fails is logged, never thrown over the error that caused it.
 */
import { messageOf } from '../../lib/errors.js';
import type { Logger } from '../../lib/log.js';

/** A step's undo; what it resolves to is not used. */
export type Undo = () => Promise<unknown>;

/** Runs the undo steps in reverse; `what` and `id` name the failed operation in the log. */
export async function undoAll(undo: Undo[], log: Logger, what: string, id: string): Promise<void> {
  for (const step of undo.reverse()) {
    await step().catch((err: unknown) => log.error({ err, id }, `undoing a failed ${what}: ${messageOf(err)}`));
  }
}
