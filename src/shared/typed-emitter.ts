import type { Logger } from './logger';
import { silentLogger } from './logger';

/** Event name -> payload object. One payload object per event keeps listeners forward-compatible. */
export type EventMap = { [event: string]: object };

type Listener<P> = (payload: P) => void;

/**
 * A small typed emitter. Unlike Node's EventEmitter, a listener that throws never breaks the
 * emitter or the listeners after it: the exception is logged and the loop goes on. A library
 * object that emits from inside ZooKeeper callbacks cannot let user code unwind its state machine.
 */
export class TypedEmitter<E extends EventMap> {
  private readonly listeners = new Map<keyof E, Set<Listener<never>>>();

  constructor(protected readonly emitterLogger: Logger = silentLogger) {}

  /** Subscribes; returns a function that unsubscribes. */
  on<K extends keyof E>(event: K, listener: Listener<E[K]>): () => void {
    let set = this.listeners.get(event);
    if (!set) this.listeners.set(event, (set = new Set()));
    set.add(listener as Listener<never>);
    return () => this.off(event, listener);
  }

  /** Subscribes for one event only. */
  once<K extends keyof E>(event: K, listener: Listener<E[K]>): () => void {
    const off = this.on(event, (payload) => {
      off();
      listener(payload);
    });
    return off;
  }

  off<K extends keyof E>(event: K, listener: Listener<E[K]>): void {
    this.listeners.get(event)?.delete(listener as Listener<never>);
  }

  /** Number of listeners, for leak checks in tests. */
  listenerCount(event: keyof E): number {
    return this.listeners.get(event)?.size ?? 0;
  }

  protected emit<K extends keyof E>(event: K, payload: E[K]): void {
    const set = this.listeners.get(event);
    if (!set || set.size === 0) return;
    // A worker emits twice per item run: one listener, the usual case, is called without copying
    // the set (the copy keeps a listener added by another from being called for this event).
    if (set.size === 1) {
      const [only] = set;
      this.call(only as Listener<E[K]>, event, payload);
      return;
    }
    for (const listener of [...set]) this.call(listener as Listener<E[K]>, event, payload);
  }

  private call<K extends keyof E>(listener: Listener<E[K]>, event: K, payload: E[K]): void {
    try {
      listener(payload);
    } catch (err) {
      this.emitterLogger.error({ err, event: String(event) }, 'event listener threw; ignored');
    }
  }

  protected removeAllListeners(): void {
    this.listeners.clear();
  }
}
