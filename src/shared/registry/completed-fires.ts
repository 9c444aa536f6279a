/**
 * Recently completed fire times of one item, kept as the data of `/{job}/sharding/{i}`. Written only
 * by the holder of the item's `running` node, atomically with deleting it, and read by the next
 * holder before it runs: a request that shows up again for a fire that already completed (a failover
 * racing a misfire hand-off, a replay after a crash) is skipped instead of run twice. Only with
 * monitorExecution, which provides the lock.
 *
 * The list is written as a JSON array whose first element is the marker `"d"`, then the oldest fire
 * time, then each next fire time as its difference from the one before: `["d",1763776800000,1000,1000]`
 * for three fires a second apart. A release writes it for every item it runs, so its size is most of
 * what a worker sends ZooKeeper and what ZooKeeper logs per item: 32 whole times took about 450 bytes,
 * the differences of a job firing every second take 174, every minute 205. An array of whole fire times
 * (what earlier versions wrote) is still read.
 */

/** How many fire times are remembered; covers any replay or failover window many times over. */
export const COMPLETED_FIRES_KEPT = 32;

/** First element of the difference-encoded form. */
const DELTAS = 'd';

/** Parses the node data; anything unreadable (written by hand, corrupted) counts as empty. */
export function parseCompletedFires(data: Buffer): number[] {
  if (data.length === 0) return [];
  let value: unknown;
  try {
    value = JSON.parse(data.toString('utf8'));
  } catch {
    return [];
  }
  if (!Array.isArray(value)) return [];
  if (value[0] !== DELTAS) return value.filter((v): v is number => Number.isSafeInteger(v));
  const fires: number[] = [];
  let at = 0;
  for (let i = 1; i < value.length; i += 1) {
    const step: unknown = value[i];
    if (!Number.isSafeInteger(step)) return [];
    at += step as number;
    if (!Number.isSafeInteger(at)) return [];
    fires.push(at);
  }
  return fires;
}

/** The node data for `fires` (in the order given), in the difference-encoded form. */
export function formatCompletedFires(fires: readonly number[]): string {
  let text = `["${DELTAS}"`;
  let previous = 0;
  for (const fire of fires) {
    text += `,${fire - previous}`;
    previous = fire;
  }
  return `${text}]`;
}

/** The list with `fireTime` added, newest last, at most {@link COMPLETED_FIRES_KEPT} entries. */
export function withCompletedFire(list: readonly number[], fireTime: number): number[] {
  const next = unboxed(list, (f) => f !== fireTime);
  addCompletedFire(next, fireTime);
  return next;
}

/**
 * Adds `fireTime` to `list` in place, as {@link withCompletedFire} does to a copy: for a list its
 * owner reads only where it cannot see the change half made, and keeps from fire to fire, where a
 * copy per run would outlive the young generation. Allocates nothing once the list is full.
 */
export function addCompletedFire(list: number[], fireTime: number): void {
  const at = list.indexOf(fireTime);
  if (at >= 0) list.splice(at, 1);
  list.push(fireTime);
  const excess = list.length - COMPLETED_FIRES_KEPT;
  if (excess > 0) {
    list.copyWithin(0, excess);
    list.length = COMPLETED_FIRES_KEPT;
  }
}

/**
 * The fires of every list, each once, oldest first, up to twice {@link COMPLETED_FIRES_KEPT}: what a
 * claim knows from the item's record and from other sources (the worker's memory, `sharding/{i}`).
 * - Adding one list's fires to another one by one (withCompletedFire) keeps the last added, so an
 *   older list added last pushed out the newest completions of the first.
 * - Keeping only the newest 32 by fire time would drop a fire the record holds because it completed
 *   lately (a failover of an older fire) as soon as the other lists add one newer fire it lacks.
 * Twice the count keeps both lists whole. The lease's next completions trim the list to the count
 * again (withCompletedFire), oldest fire times first.
 */
export function mergeCompletedFires(...lists: ReadonlyArray<readonly number[]>): number[] {
  return unboxed(new Set(lists.flat()))
    .sort((a, b) => a - b)
    .slice(-2 * COMPLETED_FIRES_KEPT);
}

/**
 * The fires (those `keep` accepts) in a new array that holds them as plain doubles. Fire times are
 * past the small-integer range, and an array made by spreading a Set, or filtered from such an
 * array, keeps each as a boxed number of its own: a worker holds one list per item lease, up to
 * {@link COMPLETED_FIRES_KEPT} long, which took 847 bytes boxed against 315 unboxed (10,000 lists of 32, heap used after a full GC). Numbers
 * pushed one by one onto an empty array are stored unboxed, and sort and slice keep them so.
 */
function unboxed(fires: Iterable<number>, keep: (fire: number) => boolean = () => true): number[] {
  const out: number[] = [];
  for (const fire of fires) if (keep(fire)) out.push(fire);
  return out;
}
