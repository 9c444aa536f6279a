/**
 * A FIFO of at most `capacity` entries that makes room by dropping its oldest entries: history
 * writers buffer records here while their store is slow or down, and a long outage must cost the
 * oldest records, never the process's memory. A ring, so that dropping and taking are O(1) per
 * entry however full it is (Array#shift copies the whole array once it is large).
 */
export class BoundedQueue<T> {
  private slots: (T | undefined)[];
  private head = 0;
  private size = 0;

  constructor(readonly capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) {
      throw new RangeError(`BoundedQueue: capacity must be a positive integer, got ${capacity}`);
    }
    // Grown on demand up to capacity: most writers never buffer more than one batch.
    this.slots = new Array<T | undefined>(Math.min(capacity, 1_024));
  }

  /** Entries held. */
  get length(): number {
    return this.size;
  }

  /** Appends `entry`; returns how many of the oldest entries were dropped to make room (0 or 1). */
  push(entry: T): number {
    let dropped = 0;
    if (this.size === this.capacity) {
      this.removeFront(1);
      dropped = 1;
    }
    this.grow(this.size + 1);
    this.slots[(this.head + this.size) % this.slots.length] = entry;
    this.size++;
    return dropped;
  }

  /** Removes and returns up to `count` entries from the front (the oldest first). */
  take(count: number): T[] {
    const n = Math.min(count, this.size);
    const out = new Array<T>(n);
    for (let i = 0; i < n; i++) out[i] = this.slots[(this.head + i) % this.slots.length] as T;
    this.removeFront(n);
    return out;
  }

  /**
   * Puts `entries` (taken earlier, oldest first) back in front of what arrived since, as they were.
   * Entries that no longer fit are dropped, the oldest first: the returned number.
   */
  putBack(entries: readonly T[]): number {
    const dropped = Math.max(0, this.size + entries.length - this.capacity);
    const kept = entries.slice(Math.min(dropped, entries.length));
    // Dropping beyond the put-back entries themselves cannot happen: size <= capacity before the call.
    this.grow(this.size + kept.length);
    this.head = (this.head - kept.length + this.slots.length) % this.slots.length;
    kept.forEach((entry, i) => (this.slots[(this.head + i) % this.slots.length] = entry));
    this.size += kept.length;
    return dropped;
  }

  /** Removes every entry; returns how many there were. */
  clear(): number {
    const n = this.size;
    this.removeFront(n);
    return n;
  }

  private removeFront(count: number): void {
    for (let i = 0; i < count; i++) this.slots[(this.head + i) % this.slots.length] = undefined;
    this.head = this.size === count ? 0 : (this.head + count) % this.slots.length;
    this.size -= count;
  }

  private grow(needed: number): void {
    if (needed <= this.slots.length) return;
    const length = Math.min(this.capacity, Math.max(needed, this.slots.length * 2));
    const next = new Array<T | undefined>(length);
    for (let i = 0; i < this.size; i++) next[i] = this.slots[(this.head + i) % this.slots.length];
    this.slots = next;
    this.head = 0;
  }
}
