import { onAbort } from '../abort-listeners';

/** Curator-style ExponentialBackoffRetry settings (ElasticJob's registry-center defaults: 1000/3000/3). */
export interface BackoffOptions {
  baseSleepMs: number;
  maxSleepMs: number;
  maxRetries: number;
}

/**
 * Sleep before retry number `attempt` (0-based): baseSleepMs * random(1 .. 2^(attempt+1)),
 * capped at maxSleepMs. The jitter keeps a fleet of workers that lost ZooKeeper together from
 * reconnecting in lockstep. `random` is injectable for tests.
 */
export function backoffDelayMs(attempt: number, options: BackoffOptions, random: () => number = Math.random): number {
  const span = 2 ** Math.min(attempt + 1, 30);
  const factor = 1 + Math.floor(random() * span);
  return Math.min(options.baseSleepMs * factor, options.maxSleepMs);
}

/**
 * Resolves after `ms`, or rejects early with the signal's reason when aborted. Sleepers share the
 * signal's one listener ({@link onAbort}): a ZooKeeper client's requests wait out their retries by
 * the hundred on its close signal when a registration of 100,000 jobs meets a slow server.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const off = signal && onAbort(signal, () => {
      clearTimeout(timer);
      reject(signal.reason);
    });
    const timer = setTimeout(() => {
      off?.();
      resolve();
    }, ms);
  });
}
