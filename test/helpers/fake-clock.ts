import type { Clock } from '../../src/leader/fire-timer';

/**
 * A hand-driven clock. Timers live on a monotonic timeline (as Node's do) while now() is that
 * timeline plus a wall offset, so a wall-clock jump moves now() without moving the timers.
 */
export class FakeClock implements Clock {
  private mono = 0;
  private wallOffset: number;
  private nextId = 1;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();
  /** Every delay passed to setTimeout, in order. */
  readonly delays: number[] = [];

  constructor(startWallMs = 0) {
    this.wallOffset = startWallMs;
  }

  now(): number {
    return this.mono + this.wallOffset;
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.nextId++;
    this.delays.push(ms);
    this.timers.set(id, { at: this.mono + ms, fn });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }

  pending(): number {
    return this.timers.size;
  }

  /** Monotonic time the single pending timer fires at. */
  pendingAt(): number | undefined {
    const [first] = this.timers.values();
    return first?.at;
  }

  /** Lets `ms` pass, running every timer at its due time, in order. */
  advance(ms: number): void {
    const target = this.mono + ms;
    for (let guard = 0; ; guard += 1) {
      if (guard > 10_000_000) throw new Error('runaway timers');
      let earliest: [number, { at: number; fn: () => void }] | undefined;
      for (const timer of this.timers) if (timer[1].at <= target && (!earliest || timer[1].at < earliest[1].at)) earliest = timer;
      if (!earliest) break;
      this.timers.delete(earliest[0]);
      this.mono = Math.max(this.mono, earliest[1].at);
      earliest[1].fn();
    }
    this.mono = target;
  }

  /** Lets time pass until now() reads `target`, running the timers due by then in order. */
  advanceTo(target: number): void {
    this.advance(target - this.now());
  }

  /** Time passes with the event loop blocked: no timer runs until the next advance(). */
  block(ms: number): void {
    this.mono += ms;
  }

  /** The wall clock jumps (NTP step, manual change); timers do not move. */
  jump(ms: number): void {
    this.wallOffset += ms;
  }

  /** Every pending timer fires right now, before its due time (an early wake-up). */
  fireEarly(): void {
    const due = [...this.timers];
    this.timers.clear();
    for (const [, timer] of due) timer.fn();
  }
}
