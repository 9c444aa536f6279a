import { ErrorCodes } from '../errors';
import type { Logger } from '../logger';
import type { ZkClient } from './zk-client';
import { WatchedCache } from './watched-cache';
import { ZkError } from './zk-errors';
import type { ZkStat } from './zk-types';

export interface NodeCacheOptions<T> {
  path: string;
  /** Turns raw bytes into a value; a throw emits `invalid` and leaves `value` undefined. */
  decode: (data: Buffer) => T;
  logger?: Logger;
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
 * Mirrors one node's data, like Curator's NodeCache: absent nodes are watched for creation,
 * watches are re-armed on every read, and a reconnect or new session triggers a full re-read.
 */
export class NodeCache<T> extends WatchedCache<NodeCacheEvents<T>> {
  private valueState: { value: T | undefined; stat: ZkStat } | undefined;

  constructor(
    zk: ZkClient,
    private readonly options: NodeCacheOptions<T>,
  ) {
    super(zk, options.path, 'node cache', options.logger);
  }

  async start(): Promise<this> {
    await this.begin();
    return this;
  }

  /** Decoded value, or undefined when the node is absent or undecodable. */
  get value(): T | undefined {
    return this.valueState?.value;
  }

  get stat(): ZkStat | undefined {
    return this.valueState?.stat;
  }

  get exists(): boolean {
    return this.valueState !== undefined;
  }




  protected async load(): Promise<void> {
    const gen = this.generation;
    const watcher = () => {
      if (gen === this.generation && !this.closed) void this.reload();
    };
    let read: { data: Buffer; stat: ZkStat } | undefined;
    try {
      read = await this.zk.get(this.options.path, watcher);
    } catch (err) {
      if (!(err instanceof ZkError && err.code === ErrorCodes.ZK_NO_NODE)) throw err;
      if (await this.zk.exists(this.options.path, watcher)) this.reloads.again();
    }
    if (this.closed) return;
    if (!read) {
      if (this.valueState) {
        this.valueState = undefined;
        this.emit('deleted', {});
      }
      return;
    }
    const previous = this.valueState?.stat;
    if (previous && previous.version === read.stat.version && previous.ctimeMs === read.stat.ctimeMs) return;
    let value: T | undefined;
    try {
      value = this.options.decode(read.data);
    } catch (error) {
      this.valueState = { value: undefined, stat: read.stat };
      this.emit('invalid', { error, stat: read.stat });
      return;
    }
    this.valueState = { value, stat: read.stat };
    this.emit('changed', { value, stat: read.stat });
  }
}
