import { forEachLimited } from '../../src/shared/concurrency';

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('forEachLimited', () => {
  it('runs every item in order with at most `limit` at once', async () => {
    let running = 0;
    let peak = 0;
    const started: number[] = [];
    await forEachLimited([1, 2, 3, 4, 5, 6, 7], 3, async (n) => {
      started.push(n);
      running += 1;
      peak = Math.max(peak, running);
      await tick();
      running -= 1;
    });
    expect(started).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(peak).toBe(3);
  });

  it('finishes the other items, then rejects with the first error', async () => {
    const done: number[] = [];
    const run = forEachLimited([1, 2, 3, 4], 2, async (n) => {
      await tick();
      if (n === 2) throw new Error('two');
      if (n === 3) throw new Error('three');
      done.push(n);
    });
    await expect(run).rejects.toThrow('two');
    expect(done.sort()).toEqual([1, 4]);
  });

  it('accepts an empty input and a limit below 1', async () => {
    await expect(forEachLimited([], 4, async () => undefined)).resolves.toBeUndefined();
    const seen: string[] = [];
    await forEachLimited(new Set(['a', 'b']), 0, async (s) => void seen.push(s));
    expect(seen).toEqual(['a', 'b']);
  });
});
