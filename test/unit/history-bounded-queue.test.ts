import { BoundedQueue } from '../../src/history/bounded-queue';

describe('BoundedQueue', () => {
  it('hands entries out oldest first, across the ring wrapping around', () => {
    const queue = new BoundedQueue<number>(4);
    [1, 2, 3].forEach((n) => queue.push(n));
    expect(queue.take(2)).toEqual([1, 2]);
    [4, 5, 6].forEach((n) => queue.push(n));
    expect(queue.length).toBe(4);
    expect(queue.take(10)).toEqual([3, 4, 5, 6]);
    expect(queue.length).toBe(0);
  });

  it('drops the oldest entry to make room and says so', () => {
    const queue = new BoundedQueue<number>(3);
    expect([1, 2, 3].map((n) => queue.push(n))).toEqual([0, 0, 0]);
    expect(queue.push(4)).toBe(1);
    expect(queue.take(3)).toEqual([2, 3, 4]);
  });

  it('puts a taken batch back in front of what arrived since', () => {
    const queue = new BoundedQueue<number>(10);
    [1, 2, 3, 4].forEach((n) => queue.push(n));
    const batch = queue.take(3);
    queue.push(5);
    expect(queue.putBack(batch)).toBe(0);
    expect(queue.take(10)).toEqual([1, 2, 3, 4, 5]);
  });

  it('drops the oldest of a put-back batch when the rest no longer fits', () => {
    const queue = new BoundedQueue<number>(4);
    [1, 2, 3].forEach((n) => queue.push(n));
    const batch = queue.take(3);
    [4, 5].forEach((n) => queue.push(n));
    expect(queue.putBack(batch)).toBe(1);
    expect(queue.take(10)).toEqual([2, 3, 4, 5]);
  });

  it('grows past its first allocation up to its capacity only', () => {
    const queue = new BoundedQueue<number>(5_000);
    for (let i = 0; i < 6_000; i++) queue.push(i);
    expect(queue.length).toBe(5_000);
    const all = queue.take(6_000);
    expect(all[0]).toBe(1_000);
    expect(all[4_999]).toBe(5_999);
  });

  it('refuses a capacity that is not a positive integer', () => {
    expect(() => new BoundedQueue(0)).toThrow(RangeError);
  });
});
