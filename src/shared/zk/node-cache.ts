import { ErrorCodes } from '../errors';
import type { Logger } from '../logger';
import type { ZkClient } from './zk-client';
import { CacheFlag, WatchedCache, type CacheListeners } from './watched-cache';
import { ZkError } from './zk-errors';
import type { ZkStat } from './zk-types';

export interface NodeCacheOptions<T> {
  path: string;
  /**
   * Turns raw bytes into a value; a throw emits `invalid` and leaves `value` undefined. `path` is
   * the node's path (for error messages), so one function can serve many caches.
   */
  decode: (data: Buffer, path: string) => T;
  logger?: Logger;
  /** Listeners fixed at construction; cheaper than `on()` for caches kept by the thousand. */
  listeners?: CacheListeners<NodeCacheEvents<T>>;
  /**
   * The node is usually absent (a flag): while it is, a load asks `exists` (one request, which
   * watches for the creation) instead of a read that fails and then an `exists`. A leader keeps such
   * a cache per job and per item; taking over 10,000 jobs, those failed reads were a third of its requests.
   */
  expectAbsent?: boolean;
}

export interface NodeCacheEvents<T> {
  [event: string]: object;
  /** The node was created or its data changed (also emitted for the first read). */
  changed: { value: T | undefined; stat: ZkStat };
  deleted: Record<string, never>;
  invalid: { error: unknown; stat: ZkStat };
  error: { error: unknown };
}

/**
 * Which write of a node something read or made: its data version, and the node's creation time,
 * since a node created again starts over at version 0.
 */
export interface NodeStamp {
  readonly version: number;
  readonly ctimeMs: number;
}

/** Whether `read` is the write `written` or a later one: of the same node, or of a node created after it. */
export function stampReaches(read: NodeStamp | undefined, written: NodeStamp): boolean {
  return read !== undefined && (read.ctimeMs > written.ctimeMs || (read.ctimeMs === written.ctimeMs && read.version >= written.version));
}

/**
 * Mirrors one node's data, like Curator's NodeCache: absent nodes are watched for creation,
 * watches are re-armed on every read, and a reconnect or new session triggers a full re-read.
 */
export class NodeCache<T> extends WatchedCache<NodeCacheEvents<T>> {
  /**
   * What was read, when the node exists: the value, and the data version and creation time that
   * tell a change from a re-read (not the whole stat: its strings and numbers cost 150 bytes, and
   * a leader keeps a cache per job and item).
   */
  private valueState: { value: T | undefined; version: number; ctimeMs: number } | undefined;
  private readonly decode: (data: Buffer, path: string) => T;

  constructor(
    zk: ZkClient,
    options: NodeCacheOptions<T>,
  ) {
    super(zk, options.path, options.logger, options.listeners);
    this.decode = options.decode;
    this.setFlag(CacheFlag.expectAbsent, options.expectAbsent === true);
  }

  protected get what(): string {
    return 'node cache';
  }

  async start(): Promise<this> {
    await this.begin();
    return this;
  }

  /** Decoded value, or undefined when the node is absent or undecodable. */
  get value(): T | undefined {
    return this.valueState?.value;
  }

  get exists(): boolean {
    return this.valueState !== undefined;
  }

  /** Which write of the node was last read; undefined while the node is absent (or not read yet). */
  get stamp(): NodeStamp | undefined {
    const state = this.valueState;
    return state && { version: state.version, ctimeMs: state.ctimeMs };
  }

  protected async load(): Promise<void> {
    let read: { data: Buffer; stat: ZkStat } | undefined;
    // Absent when last seen: usually still so. If it exists now, the read below follows.
    if (this.expectAbsent && !this.valueState && !(await this.zk.exists(this.path, this.watcher))) return;
    try {
      read = await this.zk.get(this.path, this.watcher);
    } catch (err) {
      if (!(err instanceof ZkError && err.code === ErrorCodes.ZK_NO_NODE)) throw err;
      if (await this.zk.exists(this.path, this.watcher)) this.loadAgain();
    }
    if (this.closed) return;
    if (!read) {
      if (this.valueState) {
        this.valueState = undefined;
        this.emit('deleted', {});
      }
      return;
    }
    const { stat } = read;
    const previous = this.valueState;
    if (previous && previous.version === stat.version && previous.ctimeMs === stat.ctimeMs) return;
    let value: T | undefined;
    try {
      value = this.decode(read.data, this.path);
    } catch (error) {
      this.valueState = { value: undefined, version: stat.version, ctimeMs: stat.ctimeMs };
      this.emit('invalid', { error, stat });
      return;
    }
    this.valueState = { value, version: stat.version, ctimeMs: stat.ctimeMs };
    this.emit('changed', { value, stat });
  }
}
