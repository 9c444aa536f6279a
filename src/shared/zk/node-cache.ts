import { ErrorCodes } from '../errors';
import type { Logger } from '../logger';
import { CoalescingRunner } from '../coalescing-runner';
import { TypedEmitter } from '../typed-emitter';
import type { ZkClient } from './zk-client';
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
export class NodeCache<T> extends TypedEmitter<NodeCacheEvents<T>> {
  private valueState: { value: T | undefined; stat: ZkStat } | undefined;
  private generation = 0;
  private readonly reloads = new CoalescingRunner(
    () => this.readOnce(),
    (error) => {
      this.emitterLogger.warn({ err: error, path: this.options.path }, 'node cache reload failed');
      this.emit('error', { error });
    },
  );
  private closed = false;
  private readonly unsubscribe: Array<() => void> = [];

  constructor(
    private readonly zk: ZkClient,
    private readonly options: NodeCacheOptions<T>,
  ) {
    super(options.logger);
  }

  async start(): Promise<this> {
    const resync = () => {
      this.generation += 1;
      void this.reload();
    };
    this.unsubscribe.push(this.zk.on('reconnected', resync), this.zk.on('session:renewed', resync));
    await this.reload();
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

  async settled(): Promise<void> {
    await this.reloads.settled();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.generation += 1;
    for (const off of this.unsubscribe.splice(0)) off();
    await this.reloads.stop();
    this.removeAllListeners();
  }

  private reload(): Promise<void> {
    return this.closed ? Promise.resolve() : this.reloads.request();
  }

  private async readOnce(): Promise<void> {
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
