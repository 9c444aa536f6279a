import { ErrorCodes } from '../errors';
import { intern } from '../intern';
import type { Logger } from '../logger';
import type { ZkClient } from './zk-client';
import { CacheFlag, WatchedCache, type CacheListeners } from './watched-cache';
import { ZkError } from './zk-errors';
import type { ZkStat, ZkWatchEvent } from './zk-types';

export interface ChildrenCacheOptions<T> {
  /** Parent path, namespace-relative. It may not exist yet: the cache waits for it. */
  path: string;
  /**
   * When set, each child's data is read, decoded and watched; a throw marks the child invalid.
   * `path` is the child's path (for error messages), so one function can serve many caches.
   */
  decode?: (data: Buffer, name: string, path: string) => T;
  logger?: Logger;
  /** Listeners fixed at construction; cheaper than `on()` for caches kept by the thousand. */
  listeners?: CacheListeners<ChildrenCacheEvents<T>>;
  /**
   * The parent is usually absent (a job's `trigger/` before its first trigger): while the cache holds
   * no child, a load asks `exists` first (one request that watches for the creation) instead of a
   * listing that fails and then an `exists`. An empty parent that exists costs one request more per load.
   */
  expectAbsent?: boolean;
  /**
   * Child names repeat across many caches (instance ids and server ips, in a cache per job): keep
   * one string per name ({@link intern}). Not for names that never repeat, such as request ids.
   */
  internNames?: boolean;
}

export interface ChildEntry<T> {
  name: string;
  /** Decoded data; undefined without a decoder or when the data failed to decode. */
  data: T | undefined;
  /**
   * The data version and creation time of the child as read (undefined without a decoder): what
   * tells a change from a re-read. Not the whole {@link ZkStat}: with its strings and numbers it
   * cost 200 bytes per child, and a leader keeps three children per job.
   */
  version: number | undefined;
  ctimeMs: number | undefined;
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
  /**
   * The children: none, one entry as is, or a map from the second child on. Most of a leader's
   * caches hold one child (the one worker of a job, its one server) or none, and a map of one entry
   * costs 200 bytes: 400 bytes per job.
   */
  private entries: Map<string, ChildEntry<T>> | ChildEntry<T> | undefined;
  private readonly decode: ChildrenCacheOptions<T>['decode'];
  /** Children whose data watch fired; made on first use, as most caches never need it. */
  private staleData: Set<string> | undefined;

  constructor(
    zk: ZkClient,
    options: ChildrenCacheOptions<T>,
  ) {
    super(zk, options.path, options.logger, options.listeners);
    this.decode = options.decode;
    this.setFlag(CacheFlag.expectAbsent, options.expectAbsent === true);
    this.setFlag(CacheFlag.internNames, options.internNames === true);
  }

  protected get what(): string {
    return 'children cache';
  }

  private get internNames(): boolean {
    return this.flag(CacheFlag.internNames);
  }

  /** The next load reads every child's data too (after start and resyncs). */
  private get fullReload(): boolean {
    return this.flag(CacheFlag.fullReload);
  }

  private set fullReload(on: boolean) {
    this.setFlag(CacheFlag.fullReload, on);
  }

  /** Loads the current children and starts watching. */
  async start(): Promise<this> {
    this.fullReload = true;
    await this.begin();
    return this;
  }

  /** Child names, sorted. */
  names(): string[] {
    const entries = this.entries;
    if (entries === undefined) return [];
    return entries instanceof Map ? [...entries.keys()].sort() : [entries.name];
  }

  get(name: string): ChildEntry<T> | undefined {
    const entries = this.entries;
    if (entries instanceof Map) return entries.get(name);
    return entries?.name === name ? entries : undefined;
  }

  has(name: string): boolean {
    return this.get(name) !== undefined;
  }

  get size(): number {
    const entries = this.entries;
    return entries === undefined ? 0 : entries instanceof Map ? entries.size : 1;
  }

  /** Entries sorted by name. */
  values(): ChildEntry<T>[] {
    return this.names().map((n) => this.get(n)!);
  }

  private entryList(): ChildEntry<T>[] {
    const entries = this.entries;
    return entries === undefined ? [] : entries instanceof Map ? [...entries.values()] : [entries];
  }

  private setEntry(entry: ChildEntry<T>): void {
    const entries = this.entries;
    if (entries === undefined || (!(entries instanceof Map) && entries.name === entry.name)) this.entries = entry;
    else if (entries instanceof Map) entries.set(entry.name, entry);
    else this.entries = new Map([[entries.name, entries], [entry.name, entry]]);
  }

  private deleteEntry(name: string): void {
    const entries = this.entries;
    if (!(entries instanceof Map)) {
      if (entries?.name === name) this.entries = undefined;
      return;
    }
    entries.delete(name);
    // Back to one entry as is.
    if (entries.size === 1) this.entries = entries.values().next().value as ChildEntry<T>;
    else if (entries.size === 0) this.entries = undefined;
  }

  /** A resync reloads every child's data too. */
  protected override onResync(): void {
    this.fullReload = true;
  }

  private childPath(name: string): string {
    return `${this.path === '/' ? '' : this.path}/${name}`;
  }

  /** @internal From the group: a child's data watch fired (set by {@link readChild}). */
  override onChildWatch(event: ZkWatchEvent): void {
    // A child deleted is re-read too: made again before the listing that follows (an ephemeral
    // node of a new session under the same name), it is a new node the listing alone would miss.
    if (this.closed || !this.decode || (event.type !== 'dataChanged' && event.type !== 'deleted')) return;
    (this.staleData ??= new Set()).add(event.path.slice(this.childPath('').length));
    // A deletion also fires the parent's children watch, after this one, which reloads.
    if (event.type === 'dataChanged') void this.reload();
  }

  protected async load(): Promise<void> {
    const full = this.fullReload;
    this.fullReload = false;
    let names: string[] = [];
    try {
      // Usually absent while empty: if the parent exists now, the listing follows.
      if (!this.expectAbsent || this.size > 0 || (await this.zk.exists(this.path, this.watcher))) names = await this.zk.children(this.path, this.watcher);
    } catch (err) {
      if (!(err instanceof ZkError && err.code === ErrorCodes.ZK_NO_NODE)) throw err;
      // Parent absent: watch for its creation; if it appeared meanwhile, go round again.
      if (await this.zk.exists(this.path, this.watcher)) this.loadAgain();
      names = [];
    }
    if (this.closed) return;
    const present = new Set(names);
    for (const entry of this.entryList()) {
      const name = entry.name;
      if (present.has(name)) continue;
      this.deleteEntry(name);
      this.staleData?.delete(name);
      this.emit('removed', entry);
    }
    const stale = this.staleData;
    const toRead = names.filter((n) => full || !this.has(n) || stale?.has(n));
    const read = await Promise.all(toRead.map((n) => this.readChild(n)));
    if (this.closed) return;
    for (const entry of read) {
      if (!entry) continue;
      const before = this.get(entry.name);
      this.setEntry(entry);
      if (!before) this.emit('added', entry);
      else if (before.version === undefined || entry.version === undefined || before.version !== entry.version || before.ctimeMs !== entry.ctimeMs) {
        this.emit('changed', entry);
      }
    }
    if (full) this.emit('resynced', { names: this.names() });
  }

  /** Reads one child (data + watch when decoding); undefined when it vanished meanwhile. */
  private async readChild(listed: string): Promise<ChildEntry<T> | undefined> {
    const name = this.internNames ? intern(listed) : listed;
    this.staleData?.delete(name);
    const decode = this.decode;
    if (!decode) return { name, data: undefined, version: undefined, ctimeMs: undefined };
    const childPath = this.childPath(name);
    try {
      const { data, stat } = await this.zk.get(childPath, this.watcher);
      try {
        return { name, data: decode(data, name, childPath), version: stat.version, ctimeMs: stat.ctimeMs };
      } catch (error) {
        this.log.warn({ err: error, path: childPath }, 'undecodable child data');
        this.emit('invalid', { name, error });
        return { name, data: undefined, version: stat.version, ctimeMs: stat.ctimeMs };
      }
    } catch (err) {
      if (err instanceof ZkError && err.code === ErrorCodes.ZK_NO_NODE) return undefined;
      throw err;
    }
  }
}
