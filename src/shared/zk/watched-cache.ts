import { CoalescingRunner } from '../coalescing-runner';
import type { Logger } from '../logger';
import { TypedEmitter, type EventMap } from '../typed-emitter';
import type { ZkClient } from './zk-client';

/**
 * What the ZooKeeper caches share: loads are serialized (a change during a load schedules one
 * more), a reconnect or a new session forces a full reload (watches of a dead session are gone, and
 * the generation counter turns callbacks armed before it into no-ops), and close is idempotent.
 */
export abstract class WatchedCache<E extends EventMap & { error: { error: unknown } }> extends TypedEmitter<E> {
  /** Bumped on resync and close: watch callbacks from an older generation are ignored. */
  protected generation = 0;
  protected closed = false;
  protected readonly reloads: CoalescingRunner;
  private readonly unsubscribe: Array<() => void> = [];

  protected constructor(
    protected readonly zk: ZkClient,
    protected readonly path: string,
    what: string,
    logger?: Logger,
  ) {
    super(logger);
    this.reloads = new CoalescingRunner(
      () => this.load(),
      (error) => {
        // Connection trouble: the reconnect or renew handler will resync us.
        this.emitterLogger.warn({ err: error, path }, `${what} reload failed`);
        (this.emit as (event: 'error', payload: { error: unknown }) => void)('error', { error });
      },
    );
  }

  /** One load: read, re-arm watches, emit differences. */
  protected abstract load(): Promise<void>;

  /** Called on resync before the reload (e.g. to reload data that is normally cached). */
  protected onResync(): void {}

  /** Forces a full reload; used after reconnects and new sessions. */
  resync(): void {
    if (this.closed) return;
    this.generation += 1;
    this.onResync();
    void this.reload();
  }

  /** Resolves once any load in progress (and those it scheduled) has finished. */
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

  /** Subscribes to reconnects and new sessions, then loads once. */
  protected async begin(): Promise<void> {
    const resync = () => this.resync();
    this.unsubscribe.push(this.zk.on('reconnected', resync), this.zk.on('session:renewed', resync));
    await this.reload();
  }

  protected reload(): Promise<void> {
    return this.closed ? Promise.resolve() : this.reloads.request();
  }
}
