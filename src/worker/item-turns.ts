/**
 * The order in which this process's requests take an item when several want it: an item's stranded
 * fires run oldest first (docs/design-notes.md, "Failover and catch-up"). Requests waiting for an
 * item a run of this process holds are woken one at a time, oldest fire first, when it lets go;
 * a request for a newer fire lets an older one of the same item go first.
 */
import { onAbort } from '../shared/abort-listeners';
import type { ItemLock } from './item-lock';

/** How often a request waiting for its item behind a run of this process looks again anyway. */
const TURN_POLL_MS = 500;

interface Waiter {
  fireTime: number;
  wake: () => void;
}

/** The turns of this process's requests at its items, keyed by `{job}|{item}`. */
export class ItemTurns {
  /** Requests waiting for an item, oldest fire first. */
  private readonly waiters = new Map<string, Waiter[]>();
  /** Fire times of the requests between the start and the end of their run, per item. */
  private readonly inFlight = new Map<string, number[]>();
  /** Fire times whose requests ended here while others of their item were still in flight (see `after`). */
  private readonly departed = new Map<string, Set<number>>();

  constructor(
    private readonly lock: Pick<ItemLock, 'holdsLocally' | 'knownCompleted'>,
    /** The signal that stops every wait (worker stopping, session lost). */
    private readonly stopSignal: () => AbortSignal,
  ) {}

  /** A request for `fireTime` of the item begins its run. */
  enter(key: string, fireTime: number): void {
    const inFlight = this.inFlight.get(key);
    if (inFlight) inFlight.push(fireTime);
    else this.inFlight.set(key, [fireTime]);
    // A newer fire of the item may be waiting for this one to arrive (`after`).
    this.pass(key);
  }

  /** The request for `fireTime` ended its run. */
  leave(key: string, fireTime: number): void {
    const inFlight = this.inFlight.get(key);
    if (inFlight) {
      inFlight.splice(inFlight.indexOf(fireTime), 1);
      if (inFlight.length === 0) {
        this.inFlight.delete(key);
        this.departed.delete(key);
      } else {
        let departed = this.departed.get(key);
        if (!departed) this.departed.set(key, (departed = new Set()));
        departed.add(fireTime);
      }
    }
    this.pass(key);
  }

  /** Whether a request of this process for an older fire of the item is in its run. */
  olderInFlight(key: string, fireTime: number): boolean {
    return this.inFlight.get(key)?.some((t) => t < fireTime) ?? false;
  }

  /** Whether fire `fireTime` of the item is in its run here, ended here, or is known completed. */
  arrived(key: string, fireTime: number): boolean {
    return this.inFlight.get(key)?.includes(fireTime) === true || this.departed.get(key)?.has(fireTime) === true || this.lock.knownCompleted(key, fireTime);
  }

  /** Whether requests of this process wait for the item. */
  hasWaiters(key: string): boolean {
    return this.waiters.has(key);
  }

  /** A run of ours let go of the item: the oldest request waiting for it tries again. */
  pass(key: string): void {
    this.waiters.get(key)?.[0]?.wake();
  }

  /**
   * Waits until a run of this process holding the item lets go and this request, the oldest
   * waiting, may try again (or `pollMs` passes, or `ready` says so already): by default until
   * nothing of ours holds the item and no older fire of it is in its run here. False when the
   * worker stops meanwhile.
   */
  wait(key: string, fireTime: number, ready = () => !this.lock.holdsLocally(key) && !this.olderInFlight(key, fireTime), pollMs = TURN_POLL_MS): Promise<boolean> {
    const stop = this.stopSignal();
    return new Promise<boolean>((resolve) => {
      const list = this.waiters.get(key) ?? [];
      let timer: NodeJS.Timeout | undefined;
      let offAbort: (() => void) | undefined;
      const entry: Waiter = { fireTime, wake: () => done(true) };
      const done = (ok: boolean) => {
        const at = list.indexOf(entry);
        if (at < 0) return;
        list.splice(at, 1);
        if (list.length === 0 && this.waiters.get(key) === list) this.waiters.delete(key);
        clearTimeout(timer);
        offAbort?.();
        resolve(ok);
      };
      let at = list.findIndex((w) => w.fireTime > fireTime);
      if (at < 0) at = list.length;
      list.splice(at, 0, entry);
      this.waiters.set(key, list);
      timer = setTimeout(() => done(true), pollMs);
      offAbort = onAbort(stop, () => done(false));
      // What we wait for may have happened between our look and now.
      if (ready()) done(true);
    });
  }
}
