import type { Logger } from './logger';

/** How long a step of a close may take before the log says which one is still going. */
const SLOW_CLOSE_STEP_MS = 10_000;

/**
 * Runs one step of a close (a node's, its console's): a failure is logged and the close goes on; a
 * step still running after {@link SLOW_CLOSE_STEP_MS} is named in a warning (and again when it
 * ends), so a shutdown that does not end says what it is waiting for.
 */
export async function closeStep(step: string, run: () => Promise<unknown>, log: Logger): Promise<void> {
  const started = Date.now();
  const slow = setTimeout(() => log.warn({ step, waitedMs: Date.now() - started }, 'closing: still waiting for this step'), SLOW_CLOSE_STEP_MS);
  slow.unref();
  try {
    await run();
  } catch (err) {
    log.warn({ err, step }, 'cleanup failed');
  } finally {
    clearTimeout(slow);
  }
  const tookMs = Date.now() - started;
  if (tookMs >= SLOW_CLOSE_STEP_MS) log.warn({ step, tookMs }, 'closing: a slow step ended');
  else log.debug({ step, tookMs }, 'closed');
}
