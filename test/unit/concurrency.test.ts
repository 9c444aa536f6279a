import { doublingWait, forEachLimited, Retries, Semaphore, TurnQueue } from '../../src/shared/concurrency';

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

describe('Semaphore', () => {
  it('lets `limit` holders in and the others in arrival order as places free', async () => {
    const places = new Semaphore(2);
    const order: string[] = [];
    const a = await places.acquire();
    const b = await places.acquire();
    const c = places.acquire().then((release) => (order.push('c'), release));
    const d = places.acquire().then((release) => (order.push('d'), release));
    await tick();
    expect(order).toEqual([]);
    expect(places.active).toBe(2);
    b();
    b(); // a second call of the same release frees nothing more
    await tick();
    expect(order).toEqual(['c']);
    a();
    await tick();
    expect(order).toEqual(['c', 'd']);
    (await c)();
    (await d)();
    expect(places.active).toBe(0);
  });

  it('gives a place freed while others wait to the first waiter, not to a newcomer', async () => {
    const places = new Semaphore(1);
    const release = await places.acquire();
    const waiter = places.acquire();
    release();
    expect(places.active).toBe(1); // passed on, not freed
    const newcomer = places.acquire();
    let newcomerIn = false;
    void newcomer.then(() => (newcomerIn = true));
    (await waiter)();
    await tick();
    expect(newcomerIn).toBe(true);
    (await newcomer)();
    expect(places.active).toBe(0);
  });

  it('tryAcquire takes a free place at once, and none when all are held', async () => {
    const places = new Semaphore(1);
    const release = places.tryAcquire();
    expect(release).toBeDefined();
    expect(places.tryAcquire()).toBeUndefined();
    release!();
    expect(places.active).toBe(0);
  });

  it('takes an aborted waiter out of the line with the signal\'s reason', async () => {
    const places = new Semaphore(1);
    const release = await places.acquire();
    const controller = new AbortController();
    const aborted = places.acquire(controller.signal);
    const next = places.acquire();
    controller.abort(new Error('stopping'));
    await expect(aborted).rejects.toThrow('stopping');
    release();
    (await next)();
    expect(places.active).toBe(0);
    await expect(places.acquire(controller.signal)).rejects.toThrow('stopping');
  });
});

describe('TurnQueue', () => {
  it('lets its waiters go after the microtasks queued with them, in order, at most perTurn a turn', async () => {
    const queue = new TurnQueue(3);
    const order: string[] = [];
    const waits = Array.from({ length: 7 }, (_, i) =>
      queue.next().then(() => {
        order.push(`w${i}`);
        // Another macrotask, queued in the first turn: it runs before the turns queued after it.
        if (i === 0) setImmediate(() => order.push('other'));
      }),
    );
    // Microtasks queued after the waits still go first: the waiters wait for a later macrotask.
    void Promise.resolve().then(() => order.push('microtask'));
    expect(queue.size).toBe(7);
    await Promise.all(waits);
    expect(order).toEqual(['microtask', 'w0', 'w1', 'w2', 'w3', 'w4', 'w5', 'other', 'w6']);
    expect(queue.size).toBe(0);
  });

  it('serves waiters that come while it lets others go, and starts again once empty', async () => {
    const queue = new TurnQueue(2);
    const order: number[] = [];
    await Promise.all([
      queue.next().then(() => {
        order.push(1);
        return queue.next().then(() => order.push(4));
      }),
      queue.next().then(() => order.push(2)),
      queue.next().then(() => order.push(3)),
    ]);
    expect(order).toEqual([1, 2, 3, 4]);
    await queue.next();
    expect(queue.size).toBe(0);
  });

  it('keeps no let-go waiters while it is never empty', async () => {
    const queue = new TurnQueue(64);
    const kept = () => (queue as unknown as { waiting: unknown[] }).waiting.length;
    let served = 0;
    let most = 0;
    // 10,000 waiters, each adding one more until 20,000 went: the queue is never empty meanwhile,
    // and holds 10,000 at most; without dropping the let-go ones it would keep all 20,000.
    const more = (): Promise<void> =>
      queue.next().then(() => {
        served += 1;
        most = Math.max(most, kept());
        if (served <= 10_000) return more();
      });
    await Promise.all(Array.from({ length: 10_000 }, more));
    expect(served).toBe(20_000);
    expect(most).toBeLessThan(15_000);
    expect(kept()).toBe(0);
  });
});

describe('doublingWait and Retries', () => {
  afterEach(() => jest.useRealTimers());

  it('waits the base after one failure, doubling each time, at most the cap', () => {
    expect([1, 2, 3, 4, 5, 6, 7].map((n) => doublingWait(n, 1_000, 30_000))).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
  });

  it('tries a key again after its wait while active, starts over after a success, and drops a retry once inactive', () => {
    jest.useFakeTimers();
    let active = true;
    const retries = new Retries(() => active, 1_000, 30_000);
    const runs: string[] = [];
    expect(retries.failed('q', () => runs.push('q1'))).toBe(1_000);
    expect(retries.failed('q', () => runs.push('q2'))).toBe(2_000);
    jest.advanceTimersByTime(1_000);
    expect(runs).toEqual(['q1']);
    jest.advanceTimersByTime(1_000);
    expect(runs).toEqual(['q1', 'q2']);
    retries.succeeded('q');
    expect(retries.failed('q', () => runs.push('q3'))).toBe(1_000);
    active = false;
    jest.advanceTimersByTime(1_000);
    expect(runs).toEqual(['q1', 'q2']);
    // Dropped while inactive: the key starts over.
    active = true;
    expect(retries.failed('q', () => runs.push('q4'))).toBe(1_000);
  });
});
