import { setMaxListeners } from 'node:events';
import { FireAlarm } from '../../src/worker/fire-alarm';

const T0 = Date.UTC(2026, 10, 21, 12, 0, 0);

describe('FireAlarm', () => {
  beforeEach(() => jest.useFakeTimers({ now: T0 }));
  afterEach(() => jest.useRealTimers());

  it('wakes every request held for the same fire time from one timer, in the same timer callback', async () => {
    const alarm = new FireAlarm();
    const signal = new AbortController().signal;
    setMaxListeners(0, signal); // as the worker's: one listener per held request
    const woken: number[] = [];
    const waits = Array.from({ length: 100 }, (_, i) => alarm.wait(T0 + 80, signal).then((due) => due && woken.push(i)));
    const other = alarm.wait(T0 + 1_080, signal);
    expect(jest.getTimerCount()).toBe(2);
    expect(alarm.pending).toBe(2);
    await jest.advanceTimersByTimeAsync(79);
    expect(woken).toEqual([]);
    await jest.advanceTimersByTimeAsync(1);
    await Promise.all(waits);
    expect(woken).toEqual(Array.from({ length: 100 }, (_, i) => i));
    expect(alarm.pending).toBe(1);
    await jest.advanceTimersByTimeAsync(1_000);
    await expect(other).resolves.toBe(true);
    expect(alarm.pending).toBe(0);
  });

  it('waits for the wall clock when the timer wakes before it', async () => {
    const alarm = new FireAlarm();
    let due: boolean | undefined;
    void alarm.wait(T0 + 50, new AbortController().signal).then((d) => (due = d));
    // The wall clock was set back 2 ms while the timer ran (or the monotonic clock ran ahead).
    await jest.advanceTimersByTimeAsync(48);
    jest.setSystemTime(Date.now() - 2);
    await jest.advanceTimersByTimeAsync(2);
    expect(due).toBeUndefined();
    expect(Date.now()).toBe(T0 + 48);
    await jest.advanceTimersByTimeAsync(2);
    expect(due).toBe(true);
  });

  it('resolves false as soon as the signal aborts, and true at once for a time already past', async () => {
    const alarm = new FireAlarm();
    const stop = new AbortController();
    const held = alarm.wait(T0 + 500, stop.signal);
    const kept = alarm.wait(T0 + 500, new AbortController().signal);
    stop.abort();
    await expect(held).resolves.toBe(false);
    await expect(alarm.wait(T0 + 500, stop.signal)).resolves.toBe(false);
    await expect(alarm.wait(T0, new AbortController().signal)).resolves.toBe(true);
    await jest.advanceTimersByTimeAsync(500);
    await expect(kept).resolves.toBe(true);
  });

  it('names the earliest wake time within a bound that has requests held for it; a wait behind it wakes after every request held for it', async () => {
    const alarm = new FireAlarm();
    const stop = new AbortController();
    const kept = new AbortController().signal;
    const order: string[] = [];
    void alarm.wait(T0 + 30, stop.signal);
    void alarm.wait(T0 + 40, kept).then(() => order.push('held'));
    void alarm.wait(T0 + 200, kept);
    expect(alarm.nextWake(T0, 50)).toBe(T0 + 30);
    // A wake time whose every request stopped waiting is no fire to let go first.
    stop.abort();
    await Promise.resolve();
    expect(alarm.nextWake(T0, 50)).toBe(T0 + 40);
    expect(alarm.nextWake(T0, 39)).toBeUndefined();
    expect(alarm.nextWake(T0 + 40, 50)).toBeUndefined();
    expect(alarm.nextWake(T0 + 150, 50)).toBe(T0 + 200);
    void alarm.wait(T0 + 40, kept, true).then(() => order.push('behind'));
    // A request of that fire taken later still goes first; waits behind alone are no fire to let go.
    void alarm.wait(T0 + 40, kept).then(() => order.push('held later'));
    void alarm.wait(T0 + 45, kept, true);
    expect(alarm.nextWake(T0 + 41, 200)).toBe(T0 + 200);
    await jest.advanceTimersByTimeAsync(40);
    expect(order).toEqual(['held', 'held later', 'behind']);
  });
});
