/**
 * One string object per value for values many objects repeat: a leader keeps a config per job, and
 * 100,000 configs hold a handful of cron expressions, time zones and strategies, as its caches hold
 * the names of a few instances and servers once per job. A string costs 24-40 bytes per copy.
 * The pool is bounded: when full it starts again, so values that never repeat cost nothing for long.
 */
const POOL_MAX = 4_096;
const pool = new Map<string, string>();

export function intern(value: string): string {
  const known = pool.get(value);
  if (known !== undefined) return known;
  if (pool.size >= POOL_MAX) pool.clear();
  pool.set(value, value);
  return value;
}
