import { ErrorCodes } from '../errors';
import type { Logger } from '../logger';
import type { ZkClient } from './zk-client';
import { WatchedCache } from './watched-cache';
import { ZkError } from './zk-errors';
import type { ZkStat, ZkWatchEvent } from './zk-types';

export interface ChildrenCacheOptions<T> {
  /** Parent path, namespace-relative. It may not exist yet: the cache waits for it. */
  path: string;
  /** When set, each child's data is read, decoded and watched; a throw marks the child invalid. */
  decode?: (data: Buffer, name: string) => T;
  logger?: Logger;
}

export interface ChildEntry<T> {
  name: string;
  /** Decoded data; undefined without a decoder or when the data failed to decode. */
  data: T | undefined;
  stat: ZkStat | undefined;
}

export interface ChildrenCacheEvents<T> {
  [event: string]: object;
  added: ChildEntry<T>;
  removed: ChildEntry<T>;
  changed: ChildEntry<T>;
  /** A child's data could not be decoded (corrupt or from another version); it is kept out of `data`. */
  invalid: { name: string; error: unknown };
  /** A full reload finished (after start, a reconnect, or a new session). */
  resynced: { names: string[] };
  error: { error: unknown };
}

/**
 * Mirrors the children (and optionally their data) of one node, like Curator's PathChildrenCache.
 * ZooKeeper watches fire once and die with their session, so every read re-arms its watch, a
 * reconnect or a new session triggers a full reload diffed against what we had, and reloads are
 * serialized (a change during a reload schedules one more).
 */
export class ChildrenCache<T = undefined> extends WatchedCache<ChildrenCacheEvents<T>> {
  private readonly entries = new Map<string, ChildEntry<T>>();
  private readonly staleData = new Set<string>();
  private fullReload = false;

  constructor(
    zk: ZkClient,
    private readonly options: ChildrenCacheOptions<T>,
  ) {
    super(zk, options.path, 'children cache', options.logger);
  }

  /** Loads the current children and starts watching. */
  async start(): Promise<this> {
    this.fullReload = true;
    await this.begin();
    return this;
  }

  /** Child names, sorted. */
  names(): string[] {
    return [...this.entries.keys()].sort();
  }

  get(name: string): ChildEntry<T> | undefined {
    return this.entries.get(name);
  }

  values(): ChildEntry<T>[] {
    return this.names().map((n) => this.entries.get(n)!);
  }

  /** A resync reloads every child's data too. */
  protected override onResync(): void {
    this.fullReload = true;
  }

  private watcher(): (e: ZkWatchEvent) => void {
    const gen = this.generation;
    return () => {
      if (gen === this.generation && !this.closed) void this.reload();
    };
  }

  private dataWatcher(name: string): (e: ZkWatchEvent) => void {
    const gen = this.generation;
    return (event) => {
      if (gen !== this.generation || this.closed || event.type !== 'dataChanged') return;
      this.staleData.add(name);
      void this.reload();
    };
  }

  protected async load(): Promise<void> {
    const full = this.fullReload;
    this.fullReload = false;
    let names: string[];
    try {
      names = await this.zk.children(this.options.path, this.watcher());
    } catch (err) {
      if (!(err instanceof ZkError && err.code === ErrorCodes.ZK_NO_NODE)) throw err;
      // Parent absent: watch for its creation; if it appeared meanwhile, go round again.
      if (await this.zk.exists(this.options.path, this.watcher())) this.reloads.again();
      names = [];
    }
    if (this.closed) return;
    const present = new Set(names);
    for (const [name, entry] of this.entries) {
      if (present.has(name)) continue;
      this.entries.delete(name);
      this.staleData.delete(name);
      this.emit('removed', entry);
    }
    const toRead = names.filter((n) => !this.entries.has(n) || full || this.staleData.has(n));
    const read = await Promise.all(toRead.map((n) => this.readChild(n)));
    if (this.closed) return;
    for (const entry of read) {
      if (!entry) continue;
      const before = this.entries.get(entry.name);
      this.entries.set(entry.name, entry);
      if (!before) this.emit('added', entry);
      else if (!before.stat || !entry.stat || before.stat.version !== entry.stat.version || before.stat.ctimeMs !== entry.stat.ctimeMs) {
        this.emit('changed', entry);
      }
    }
    if (full) this.emit('resynced', { names: this.names() });
  }

  /** Reads one child (data + watch when decoding); undefined when it vanished meanwhile. */
  private async readChild(name: string): Promise<ChildEntry<T> | undefined> {
    this.staleData.delete(name);
    const childPath = `${this.options.path === '/' ? '' : this.options.path}/${name}`;
    if (!this.options.decode) return { name, data: undefined, stat: undefined };
    try {
      const { data, stat } = await this.zk.get(childPath, this.dataWatcher(name));
      try {
        return { name, data: this.options.decode(data, name), stat };
      } catch (error) {
        this.emitterLogger.warn({ err: error, path: childPath }, 'undecodable child data');
        this.emit('invalid', { name, error });
        return { name, data: undefined, stat };
      }
    } catch (err) {
      if (err instanceof ZkError && err.code === ErrorCodes.ZK_NO_NODE) return undefined;
      throw err;
    }
  }
}
