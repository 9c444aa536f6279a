import v8 from 'node:v8';

/** V8's own flag; also accepted with underscores. */
const FLAG = /^--heap[-_]growing[-_]percent(=|$)/;

/** What {@link applyHeapGrowth} did. */
export type HeapGrowth = { kind: 'set'; percent: number } | { kind: 'v8-default' } | { kind: 'node-flag'; flag: string };

/**
 * Bounds how far V8 lets the old generation grow past the live heap before its next full GC, to
 * `1 + percent / 100` times the live heap; V8 otherwise picks up to 4 times on a heap whose GC is
 * fast. A leader promotes each fire's plans, ledgers and enqueue state out of the young generation
 * (they live from planning to enqueue, up to a second), so with V8's default its RSS settled at
 * about 5 times its live heap (840 MB for 148 MB live at 10,000 jobs in bench/RESULTS.md). A node
 * started with `--heap-growing-percent` keeps that flag; 0 leaves V8's own policy.
 */
export function applyHeapGrowth(percent: number, execArgv: readonly string[] = process.execArgv): HeapGrowth {
  const flag = execArgv.find((arg) => FLAG.test(arg));
  if (flag !== undefined) return { kind: 'node-flag', flag };
  if (percent === 0) return { kind: 'v8-default' };
  v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
  return { kind: 'set', percent };
}
