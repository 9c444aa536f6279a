/**
 * Recently completed fire times of one item, kept as the data of `/{job}/sharding/{i}` (a JSON
 * array). Written only by the holder of the item's `running` node, atomically with deleting it, and
 * checked by every holder before it runs: a request that shows up again for a fire that already
 * completed (a failover racing a misfire hand-off, a replay after a crash) is skipped instead of
 * run twice. Only with monitorExecution, which provides the lock.
 *
 * The list is not read per execution. Each worker keeps what it last read or wrote, with the node
 * version, and takes the lock with `multi(check(sharding/{i}, version), create(running))`: when the
 * check passes, the cached list is exactly the node's content at the moment the lock was taken, so
 * the duplicate check is exact for every request whatever its source; when it fails, someone else
 * recorded a completion since (the item moved, a failover ran it), and the list is read again.
 */

/** How many fire times are remembered; covers any replay or failover window many times over. */
export const COMPLETED_FIRES_KEPT = 32;

/** The list of one item as of node version `version`. */
export interface CompletedFires {
  readonly list: readonly number[];
  readonly version: number;
  /** Known from a read rather than from our own write (the holder then looks for misfire marks). */
  readonly read?: boolean;
}

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

/**
 * This worker's view of each item's list (key `{job}|{item}`). An entry may be stale: it is only
 * ever used under a version check, so staleness costs a read, never a wrong answer. Entries are
 * replaced by what we read and by what our own version-checked writes produced.
 */
export class CompletedFiresCache {
  private readonly entries = new Map<string, CompletedFires>();

  get(key: string): CompletedFires | undefined {
    return this.entries.get(key);
  }

  set(key: string, value: CompletedFires): void {
    this.entries.set(key, value);
  }

  /** Forgets an entry whose node version we no longer know (a write with an unknown outcome). */
  forget(key: string): void {
    this.entries.delete(key);
  }
}
