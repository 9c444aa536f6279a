import v8 from 'node:v8';
import { ConfigError, ErrorCodes } from './errors';

/** V8's own flag; also accepted with underscores. */
const FLAG = /^--heap[-_]growing[-_]percent(=|$)/;

/**
 * The heap growing percent of a node with the scheduler role when none is configured. A leader holds its jobs' views
 * and promotes each fire's plans; a worker promotes the requests in flight and their executions,
 * which live long enough to leave the young generation at thousands of items a second. With V8's
 * own policy the old generation of either grew to 3-4 times its live heap. For workers, paired
 * throughput rounds and fire-to-start latencies showed no cost at 50% (docs/design-notes.md,
 * "Leader memory" and "Worker memory").
 */
export const DEFAULT_HEAP_GROWTH_PERCENT = 50;

/**
 * The heap growing percent of a node that runs no scheduler (a worker, a console) when none is
 * configured. Once a worker's per-execution garbage no longer reached the old generation in bulk
 * (docs/design-notes.md, "Worker memory"), 20 paired throughput rounds at 30% against 50% gave a
 * lower worker RSS in every pair (median 145 against 154.5 MB) with the same worker CPU per item
 * (per-pair ratio median 1.000).
 */
export const WORKER_HEAP_GROWTH_PERCENT = 30;

/** The percent a node with `roles` gets when none is configured: a leader's, or a worker's. */
export function defaultHeapGrowthPercent(roles: readonly string[]): number {
  return roles.includes('scheduler') ? DEFAULT_HEAP_GROWTH_PERCENT : WORKER_HEAP_GROWTH_PERCENT;
}

/**
 * The heap growing percent while a leader or standby loads its jobs' views
 * ({@link tightenHeapGrowth}). At 100,000 jobs the load builds the live heap from nothing to about
 * 250 MB in a minute or more, and leaves the garbage of 600,000 reads behind it; at 50% its peak
 * RSS at the election was the process's highest of the run.
 */
export const LOADING_HEAP_GROWTH_PERCENT = 20;

/** The percent {@link applyHeapGrowth} set, while it is ours to change: not a node flag, not V8's policy. */
let applied: number | undefined;
/** Holders of {@link tightenHeapGrowth}. */
let tightened = 0;

/** What {@link applyHeapGrowth} did. */
export type HeapGrowth = { kind: 'set'; percent: number } | { kind: 'v8-default' } | { kind: 'node-flag'; flag: string };

/**
 * Bounds how far V8 lets the old generation grow past the live heap before its next full GC, to
 * `1 + percent / 100` times the live heap; V8 otherwise picks up to 4 times on a heap whose GC is
 * fast. A leader promotes each fire's plans, ledgers and enqueue state out of the young generation
 * (they live from planning to enqueue, up to a second), so with V8's default its RSS settled at
 * about 5 times its live heap (840 MB for 148 MB live at 10,000 jobs in bench/RESULTS.md). A node
 * started with `--heap-growing-percent` keeps that flag; 0 leaves V8's own policy. See
 * {@link DEFAULT_HEAP_GROWTH_PERCENT} for the default.
 */
export function applyHeapGrowth(percent: number, execArgv: readonly string[] = process.execArgv): HeapGrowth {
  if (!Number.isInteger(percent) || percent < 0 || percent > 400) {
    throw new ConfigError(ErrorCodes.INVALID_CONFIG, 'Invalid node options', [{ field: 'heapGrowthPercent', message: `${String(percent)} is not an integer from 0 to 400 (percent)` }]);
  }
  const flag = execArgv.find((arg) => FLAG.test(arg));
  const before = applied;
  applied = undefined;
  if (flag !== undefined) return { kind: 'node-flag', flag };
  if (percent === 0) {
    // A percent this module set earlier in the process (several nodes in one) goes back to V8's policy.
    if (before !== undefined) v8.setFlagsFromString('--heap-growing-percent=0');
    return { kind: 'v8-default' };
  }
  applied = percent;
  setPercent();
  return { kind: 'set', percent };
}

/** Gives V8 the percent in force now ({@link heapGrowthNow}), if this module sets it. */
function setPercent(): void {
  const percent = heapGrowthNow();
  if (percent !== undefined) v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
}

/**
 * Holds the heap to {@link LOADING_HEAP_GROWTH_PERCENT} past its live size until the returned
 * function is called (once; holds nest), when the percent {@link applyHeapGrowth} set is larger.
 * A load that grows the live heap for a minute otherwise lets the old generation run 50% past it
 * at every step, with the load's garbage on top; the tighter bound costs more full collections
 * while the load lasts, and none after. Nothing changes where the percent is a node flag, V8's own
 * policy, or not set by this process.
 */
export function tightenHeapGrowth(): () => void {
  tightened += 1;
  if (tightened === 1) setPercent();
  let released = false;
  return () => {
    if (released) return;
    released = true;
    tightened -= 1;
    if (tightened === 0) setPercent();
  };
}

/** The percent in force now, as this module set it (undefined: a node flag or V8's policy). */
export function heapGrowthNow(): number | undefined {
  return applied === undefined ? undefined : tightened > 0 ? Math.min(applied, LOADING_HEAP_GROWTH_PERCENT) : applied;
}
