import { getEventListeners } from 'node:events';
import { backoffDelayMs, sleep } from '../../src/shared/zk/backoff';

const options = { baseSleepMs: 100, maxSleepMs: 3_000, maxRetries: 3 };

describe('backoffDelayMs', () => {
  it('grows exponentially with jitter and never passes maxSleepMs', () => {
    expect(backoffDelayMs(0, options, () => 0)).toBe(100);
    expect(backoffDelayMs(0, options, () => 0.999)).toBe(200);
    expect(backoffDelayMs(1, options, () => 0.999)).toBe(400);
    expect(backoffDelayMs(2, options, () => 0.999)).toBe(800);
    expect(backoffDelayMs(10, options, () => 0.999)).toBe(3_000);
    expect(backoffDelayMs(1_000, options, () => 0.5)).toBe(3_000);
  });

  it('stays within [base, max] for random draws', () => {
    for (let attempt = 0; attempt < 20; attempt += 1) {
      const d = backoffDelayMs(attempt, options);
      expect(d).toBeGreaterThanOrEqual(100);
      expect(d).toBeLessThanOrEqual(3_000);
    }
  });
});

describe('sleep', () => {
  it('rejects at once with the reason when aborted', async () => {
    const controller = new AbortController();
    const pending = sleep(60_000, controller.signal);
    controller.abort(new Error('closing'));
    await expect(pending).rejects.toThrow('closing');
  });

  it('shares one abort listener among any number of sleepers, each rejected on abort, and resolves those whose time came', async () => {
    const controller = new AbortController();
    const long = Array.from({ length: 50 }, () => sleep(60_000, controller.signal));
    await sleep(5, controller.signal);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    controller.abort(new Error('closing'));
    for (const pending of long) await expect(pending).rejects.toThrow('closing');
  });
});
