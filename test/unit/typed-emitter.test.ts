import { TypedEmitter } from '../../src/shared/typed-emitter';
import type { Logger } from '../../src/shared/logger';

type Events = { ping: { n: number }; pong: { n: number } };

class Emitter extends TypedEmitter<Events> {
  fire<K extends keyof Events>(event: K, payload: Events[K]): void {
    this.emit(event, payload);
  }
  clear(): void {
    this.removeAllListeners();
  }
}

describe('TypedEmitter', () => {
  it('delivers to each listener once, in subscription order, and the same listener only once', () => {
    const e = new Emitter();
    const seen: string[] = [];
    const a = ({ n }: { n: number }) => seen.push(`a${n}`);
    e.on('ping', a);
    e.on('ping', a);
    e.on('ping', ({ n }) => seen.push(`b${n}`));
    e.on('pong', ({ n }) => seen.push(`p${n}`));
    e.fire('ping', { n: 1 });
    expect(seen).toEqual(['a1', 'b1']);
    expect(e.listenerCount('ping')).toBe(2);
  });

  it('unsubscribes through off and the returned function, and once fires one time', () => {
    const e = new Emitter();
    const seen: number[] = [];
    const off = e.on('ping', ({ n }) => seen.push(n));
    e.once('ping', ({ n }) => seen.push(n * 10));
    e.fire('ping', { n: 1 });
    off();
    e.fire('ping', { n: 2 });
    expect(seen).toEqual([1, 10]);
    expect(e.listenerCount('ping')).toBe(0);
    e.off('ping', () => undefined);
  });

  it('delivers an event to the listeners present when it was emitted, even if one unsubscribes another', () => {
    const e = new Emitter();
    const seen: string[] = [];
    const second = () => seen.push('second');
    e.on('ping', () => {
      seen.push('first');
      e.off('ping', second);
      e.on('ping', () => seen.push('late'));
    });
    e.on('ping', second);
    e.fire('ping', { n: 1 });
    expect(seen).toEqual(['first', 'second']);
  });

  it('calls a lone listener once, not one it subscribes while it runs, and logs it if it throws', () => {
    const errors: unknown[] = [];
    const logger = { error: (obj: unknown) => errors.push(obj) } as unknown as Logger;
    const e = new Emitter(logger);
    const seen: string[] = [];
    e.once('ping', ({ n }) => {
      seen.push(`once${n}`);
      e.on('ping', ({ n: m }) => seen.push(`late${m}`));
    });
    e.fire('ping', { n: 1 });
    e.fire('ping', { n: 2 });
    expect(seen).toEqual(['once1', 'late2']);
    e.clear();
    e.on('pong', () => {
      throw new Error('boom');
    });
    e.fire('pong', { n: 3 });
    expect(errors).toHaveLength(1);
  });

  it('logs a listener that throws and goes on with the others', () => {
    const errors: unknown[] = [];
    const logger = { error: (obj: unknown) => errors.push(obj) } as unknown as Logger;
    const e = new Emitter(logger);
    const seen: number[] = [];
    e.on('ping', () => {
      throw new Error('boom');
    });
    e.on('ping', ({ n }) => seen.push(n));
    e.fire('ping', { n: 3 });
    expect(seen).toEqual([3]);
    expect(errors).toHaveLength(1);
    e.clear();
    expect(e.listenerCount('ping')).toBe(0);
  });
});
