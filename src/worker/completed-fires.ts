/**
 * Recently completed fire times of one item, kept as the data of `/{job}/sharding/{i}` (a JSON
 * array). Written only by the holder of the item's `running` node, atomically with deleting it, and
 * read by the next holder before it runs: a request that shows up again for a fire that already
 * completed (a failover racing a misfire hand-off, a replay after a crash) is skipped instead of
 * run twice. Only with monitorExecution, which provides the lock.
 */

/** How many fire times are remembered; covers any replay or failover window many times over. */
export const COMPLETED_FIRES_KEPT = 32;

/** Parses the node data; anything unreadable (written by hand, older version) counts as empty. */
export function parseCompletedFires(data: Buffer): number[] {
  if (data.length === 0) return [];
  try {
    const value: unknown = JSON.parse(data.toString('utf8'));
    return Array.isArray(value) ? value.filter((v): v is number => Number.isSafeInteger(v)) : [];
  } catch {
    return [];
  }
}

/** The list with `fireTime` added, newest last, at most {@link COMPLETED_FIRES_KEPT} entries. */
export function withCompletedFire(list: readonly number[], fireTime: number): number[] {
  const next = list.filter((f) => f !== fireTime);
  next.push(fireTime);
  return next.slice(-COMPLETED_FIRES_KEPT);
}
