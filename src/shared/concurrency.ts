/**
 * Runs `task` for every item with at most `limit` running at once, in order of the items, and
 * resolves when all have settled; rejects with the first error after the others have settled.
 * Used where a burst (10,000 jobs loaded at a takeover, a fire's enqueue) would otherwise keep every
 * request, buffer and promise alive at the same time.
 */
export async function forEachLimited<T>(items: Iterable<T>, limit: number, task: (item: T) => Promise<unknown>): Promise<void> {
  const iterator = items[Symbol.iterator]();
  let failed = false;
  let firstError: unknown;
  const lane = async (): Promise<void> => {
    for (let next = iterator.next(); !next.done; next = iterator.next()) {
      try {
        await task(next.value);
      } catch (err) {
        if (!failed) firstError = err;
        failed = true;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, limit) }, lane));
  if (failed) throw firstError;
}
