import { silentLogger, type Logger } from '../logger';
import { TypedEmitter, type EventMap } from '../typed-emitter';
import type { ZkClient } from './zk-client';
import type { ZkWatchEvent, ZkWatcher } from './zk-types';

/**
 * Listeners given at construction, one per event, called as methods of this object (so it can be a
 * small class instance holding what it needs, where closures would cost a function per cache and
 * event), with the cache as second argument (so that one object can serve several caches). A
 * leader keeps several caches per job for tens of thousands of jobs; `on()` would add an emitter
 * and a listener set per event to each. They run before the `on()` listeners; one that throws is
 * logged and ignored.
 */
export type CacheListeners<E extends EventMap> = {
  // Named events only: the event maps' string index signature is not an event.
  readonly [K in keyof E as string extends K ? never : K]?: (payload: E[K], cache: object) => void;
};

/** Loads in flight per ZooKeeper client; more wait their turn (see {@link CacheGroup}). */
const MAX_CONCURRENT_LOADS = 128;

/** What a {@link CacheGroup} calls on its caches. */
interface GroupMember {
  resync(): void;
  /** A watch on the cache's own path fired. */
  onWatch(): void;
  /** A watch on a child of the cache's path fired (only children caches watch those). */
  onChildWatch(event: ZkWatchEvent): void;
}

/**
 * The caches of one ZooKeeper client. One pair of connection listeners resyncs them all, and their
 * loads share {@link MAX_CONCURRENT_LOADS} slots: a leader taking over 10,000 jobs, or resyncing
 * after a reconnect, would otherwise have tens of thousands of reads (and their buffers, promises
 * and callbacks) in flight at once, and the heap grows by hundreds of megabytes for that burst.
 *
 * Every watch the caches set is the group's one {@link watcher}, which hands a notification to
 * the caches of its path (and to those of its parent, for a child's data). A watcher per cache,
 * with the client's wrapper of it, cost 150 bytes per cache: a leader keeps five caches per job.
 */
class CacheGroup {
  /** The caches by path: usually one, several when caches of one path live at the same time. */
  private readonly byPath = new Map<string, GroupMember | GroupMember[]>();
  /** The watcher of every watch the group's caches set. */
  readonly watcher: ZkWatcher = (event) => this.deliver(event);
  private active = 0;
  /** FIFO of loads waiting for a slot; `head` avoids O(n) shifts on long queues. */
  private waiting: Array<() => void> = [];
  private head = 0;
  private readonly unsubscribe: Array<() => void>;

  constructor(zk: ZkClient) {
    const resync = () => {
      for (const cache of [...this.byPath.values()].flat()) cache.resync();
    };
    this.unsubscribe = [zk.on('reconnected', resync), zk.on('session:renewed', resync)];
  }

  get empty(): boolean {
    return this.byPath.size === 0;
  }

  add(path: string, cache: GroupMember): void {
    const present = this.byPath.get(path);
    if (present === undefined) this.byPath.set(path, cache);
    else if (Array.isArray(present)) present.push(cache);
    else this.byPath.set(path, [present, cache]);
  }

  remove(path: string, cache: GroupMember): void {
    const present = this.byPath.get(path);
    if (present === cache) this.byPath.delete(path);
    else if (Array.isArray(present)) {
      const rest = present.filter((c) => c !== cache);
      this.byPath.set(path, rest.length === 1 ? rest[0] : rest);
    }
  }

  private deliver(event: ZkWatchEvent): void {
    const own = this.byPath.get(event.path);
    if (own !== undefined) for (const cache of Array.isArray(own) ? [...own] : [own]) cache.onWatch();
    const slash = event.path.lastIndexOf('/');
    if (slash < 0 || event.path === '/') return;
    const parent = this.byPath.get(slash === 0 ? '/' : event.path.slice(0, slash));
    if (parent !== undefined) for (const cache of Array.isArray(parent) ? [...parent] : [parent]) cache.onChildWatch(event);
  }

  acquire(): Promise<void> | undefined {
    if (this.active < MAX_CONCURRENT_LOADS) {
      this.active += 1;
      return undefined;
    }
    return new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  /** Hands the slot to the next waiting load, if any. */
  release(): void {
    if (this.head < this.waiting.length) {
      const next = this.waiting[this.head]!;
      this.head += 1;
      if (this.head === this.waiting.length) {
        this.waiting = [];
        this.head = 0;
      }
      next();
    } else {
      this.active -= 1;
    }
  }

  stop(): void {
    for (const off of this.unsubscribe) off();
  }
}

const groups = new WeakMap<ZkClient, CacheGroup>();

/** The bits of a cache's flags: two of {@link WatchedCache}'s, the rest its subclasses'. */
export const CacheFlag = Object.freeze({ closed: 1, again: 2, expectAbsent: 4, internNames: 8, fullReload: 16 });

/**
 * `text` as one flat string. A path built by concatenation (`/${job}/config`) is a V8 cons string
 * of its parts; once hashed (a map key) V8 flattens it into a copy and keeps the cons in front of
 * it, 32 bytes more per path: a cache keeps its path for good, and a leader has several per job.
 * A join of two parts builds one flat string (a join of one returns the string as is).
 */
export function flatString(text: string): string {
  return text.length < 2 ? text : [text.slice(0, 1), text.slice(1)].join('');
}

/** The `on()` side of a cache, made on first subscription. */
class CacheEmitter<E extends EventMap> extends TypedEmitter<E> {
  fire<K extends keyof E>(event: K, payload: E[K]): void {
    this.emit(event, payload);
  }

  clear(): void {
    this.removeAllListeners();
  }
}

/**
 * What the ZooKeeper caches share: loads are serialized (a change during a load schedules one
 * more), a reconnect or a new session forces a full reload (watches of a dead session are gone),
 * and close is idempotent. ZooKeeper watches are one-shot, and a watch armed before a resync that
 * fires later only causes one more reload.
 */
export abstract class WatchedCache<E extends EventMap & { error: { error: unknown } }> implements GroupMember {
  /**
   * The cache's booleans, its own and its subclass's, as bits of one number ({@link CacheFlag}): a
   * leader keeps six caches per job, and a field costs 8 bytes in each.
   */
  private flags = 0;
  protected readonly log: Logger;
  private emitter: CacheEmitter<E> | undefined;
  /** The loop of loads in progress; requests made meanwhile set `again` and share it. */
  private running: Promise<void> | undefined;
  /** The load() call in progress, which close() waits for. */
  private loading: Promise<void> | undefined;
  private group: CacheGroup | undefined;

  protected readonly path: string;

  protected constructor(
    protected readonly zk: ZkClient,
    path: string,
    logger?: Logger,
    private readonly initialListeners?: CacheListeners<E>,
  ) {
    this.path = flatString(path);
    this.log = logger ?? silentLogger;
  }

  /** What the cache is, for log lines ("node cache"). */
  protected abstract get what(): string;

  protected flag(bit: number): boolean {
    return (this.flags & bit) !== 0;
  }

  protected setFlag(bit: number, on: boolean): void {
    this.flags = on ? this.flags | bit : this.flags & ~bit;
  }

  protected get closed(): boolean {
    return this.flag(CacheFlag.closed);
  }

  /** The cache's node is usually absent: a load asks `exists` first (the subclasses' option). */
  protected get expectAbsent(): boolean {
    return this.flag(CacheFlag.expectAbsent);
  }

  /** A load was asked for while one ran: the loop runs once more. */
  private get again(): boolean {
    return this.flag(CacheFlag.again);
  }

  private set again(on: boolean) {
    this.setFlag(CacheFlag.again, on);
  }

  /** Subscribes; returns a function that unsubscribes. Listener exceptions are logged and ignored. */
  on<K extends keyof E>(event: K, listener: (payload: E[K]) => void): () => void {
    return (this.emitter ??= new CacheEmitter<E>(this.log)).on(event, listener);
  }

  /** Subscribes for one event only. */
  once<K extends keyof E>(event: K, listener: (payload: E[K]) => void): () => void {
    return (this.emitter ??= new CacheEmitter<E>(this.log)).once(event, listener);
  }

  off<K extends keyof E>(event: K, listener: (payload: E[K]) => void): void {
    this.emitter?.off(event, listener);
  }

  /** Number of `on()` listeners, for leak checks in tests. */
  listenerCount(event: keyof E): number {
    return this.emitter?.listenerCount(event) ?? 0;
  }

  /**
   * The watcher of every watch this cache sets, on its path or its children's: its group's, which
   * calls {@link onWatch} or {@link onChildWatch}. Loads run only after {@link begin} joined a group.
   */
  protected get watcher(): ZkWatcher {
    return this.group!.watcher;
  }

  /** One load: read, re-arm watches, emit differences. */
  protected abstract load(): Promise<void>;

  /** Called on resync before the reload (e.g. to reload data that is normally cached). */
  protected onResync(): void {}

  /** @internal From the group: a watch on this cache's path fired. */
  onWatch(): void {
    if (!this.closed) void this.reload();
  }

  /** @internal From the group: a watch on a child of this cache's path fired. */
  onChildWatch(_event: ZkWatchEvent): void {}

  /** Forces a full reload; used after reconnects and new sessions. */
  resync(): void {
    if (this.closed) return;
    this.onResync();
    void this.reload();
  }

  /** Resolves once any load in progress (and those it scheduled) has finished. */
  async settled(): Promise<void> {
    while (this.running) await this.running;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.setFlag(CacheFlag.closed, true);
    this.leaveGroup();
    // A load still waiting for its slot is skipped when the slot comes; only one running now is awaited.
    await this.loading?.catch(() => undefined);
    this.emitter?.clear();
  }

  /** Joins the client's group (resyncs, load slots), then loads once. */
  protected async begin(): Promise<void> {
    if (this.closed || this.group) return this.settled();
    let group = groups.get(this.zk);
    if (!group) groups.set(this.zk, (group = new CacheGroup(this.zk)));
    group.add(this.path, this);
    this.group = group;
    await this.reload();
  }

  protected reload(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = this.runLoads().finally(() => (this.running = undefined));
    return this.running;
  }

  /** From inside load(): run once more after this load. */
  protected loadAgain(): void {
    this.again = true;
  }

  protected emit<K extends keyof E>(event: K, payload: E[K]): void {
    const listeners = this.initialListeners as { [K in keyof E]?: (payload: E[K], cache: object) => void } | undefined;
    const listener = listeners?.[event];
    if (listener) {
      try {
        listener.call(listeners, payload, this);
      } catch (err) {
        this.log.error({ err, event: String(event), path: this.path }, 'cache listener threw; ignored');
      }
    }
    this.emitter?.fire(event, payload);
  }

  private async runLoads(): Promise<void> {
    do {
      this.again = false;
      const group = this.group;
      await group?.acquire();
      try {
        if (this.closed) return;
        this.loading = this.load();
        await this.loading;
      } catch (error) {
        // Connection trouble: the reconnect or renew handler will resync us.
        if (!this.closed) {
          this.log.warn({ err: error, path: this.path }, `${this.what} reload failed`);
          (this.emit as (event: 'error', payload: { error: unknown }) => void)('error', { error });
        }
      } finally {
        this.loading = undefined;
        group?.release();
      }
    } while (this.again && !this.closed);
  }

  private leaveGroup(): void {
    const group = this.group;
    if (!group) return;
    group.remove(this.path, this);
    if (group.empty && groups.get(this.zk) === group) {
      group.stop();
      groups.delete(this.zk);
    }
  }
}
