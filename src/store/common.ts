/** Pieces both store backends share. */
import type { CompareOp } from './types.js';

/** Largest page a range returns (etcd's default request size limit stays far away). */
export const MAX_PAGE = 1000;

export function compareNumbers(actual: number, op: CompareOp, expected: number): boolean {
  switch (op) {
    case '==':
      return actual === expected;
    case '!=':
      return actual !== expected;
    case '<':
      return actual < expected;
    case '>':
      return actual > expected;
  }
}
