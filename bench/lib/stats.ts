/** Percentile summaries and small formatting helpers shared by every scenario. */

export interface Summary {
  n: number;
  p50: number;
  p99: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentile of an ascending array (p in 0..100). */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

export function summarize(values: readonly number[]): Summary {
  const sorted = Float64Array.from(values).sort();
  const arr = Array.from(sorted);
  const mean = arr.length === 0 ? Number.NaN : arr.reduce((a, b) => a + b, 0) / arr.length;
  return { n: arr.length, p50: round(percentile(arr, 50), 2), p99: round(percentile(arr, 99), 2), max: round(arr[arr.length - 1] ?? Number.NaN, 2), mean: round(mean, 2) };
}

export function round(x: number, digits = 1): number {
  if (!Number.isFinite(x)) return x;
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** "12.3 / 45.6 / 78.9" (p50 / p99 / max), or "n/a". */
export function triple(s: Summary | undefined, unit = 'ms'): string {
  if (!s || s.n === 0) return 'n/a';
  return `${fmt(s.p50)} / ${fmt(s.p99)} / ${fmt(s.max)} ${unit}`;
}

export function fmt(x: number | undefined, digits = 1): string {
  if (x === undefined || Number.isNaN(x)) return 'n/a';
  if (!Number.isFinite(x)) return '∞';
  if (Math.abs(x) >= 1000) return Math.round(x).toLocaleString('en-US');
  return String(round(x, Math.abs(x) < 1 ? Math.max(digits, 2) : digits));
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls until `predicate` returns truthy; throws naming `what` after `timeoutMs`. */
type Falsy = undefined | null | false | 0 | '';
export async function waitUntil<T>(predicate: () => T | Falsy | Promise<T | Falsy>, timeoutMs: number, what: string, intervalMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await predicate();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/** Wall clock for timestamps compared across processes (see fixtures/recorder.ts). */
export const nowMs = (): number => Date.now();
