/**
 * Bull Board at `/queues`, over every live instance queue of the namespace: queues are added and
 * removed as instances come and go (a queue of a dead incarnation is emptied and removed by the
 * leader's failover), and the BullMQ Queue objects of removed ones are closed. Who may change
 * anything there (retry, clean, promote) is the console's auth hook's business: a read-only caller's
 * writes are refused before they reach Bull Board.
 */
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import { Queue } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from '../shared/logger';
import { QUEUE_PREFIX } from '../shared/registry/queue-names';

export const BULL_BOARD_PATH = '/queues';

/** The live instance queues, however the console learns them. */
export type LiveQueues = () => Promise<readonly string[]>;

/** Bull Board mounted on a console, following the live queues. */
export class BullBoard {
  private readonly queues = new Map<string, Queue>();
  private readonly board: ReturnType<typeof createBullBoard>;
  private readonly adapter = new FastifyAdapter();
  private timer: NodeJS.Timeout | undefined;
  private syncing: Promise<void> | undefined;

  constructor(
    private readonly connection: Redis | Cluster,
    private readonly live: LiveQueues,
    private readonly log: Logger,
    /** BullMQ prefix of the namespace's queues (`queuePrefix(namespace, target)`). */
    private readonly prefix = QUEUE_PREFIX,
    private readonly intervalMs = 2_000,
  ) {
    this.adapter.setBasePath(BULL_BOARD_PATH);
    this.board = createBullBoard({ queues: [], serverAdapter: this.adapter, options: { uiConfig: { boardTitle: 'shardcron queues' } } });
  }

  /** Registers Bull Board's routes under {@link BULL_BOARD_PATH} and starts following the queues. */
  async mount(app: FastifyInstance): Promise<void> {
    await app.register(this.adapter.registerPlugin(), { prefix: BULL_BOARD_PATH });
    await this.sync();
    this.timer = setInterval(() => void this.sync(), this.intervalMs);
    this.timer.unref();
  }

  /** The queue names shown now. */
  shown(): string[] {
    return [...this.queues.keys()].sort();
  }

  /** Brings the board in line with the live queues (one sync at a time). */
  sync(): Promise<void> {
    return (this.syncing ??= this.doSync().finally(() => (this.syncing = undefined)));
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.syncing?.catch(() => undefined);
    const queues = [...this.queues.values()];
    this.queues.clear();
    await Promise.allSettled(queues.map((q) => q.close()));
  }

  private async doSync(): Promise<void> {
    let live: readonly string[];
    try {
      live = await this.live();
    } catch (err) {
      this.log.warn({ err }, 'Bull Board: could not list the live queues');
      return;
    }
    const wanted = new Set(live);
    for (const [name, queue] of this.queues) {
      if (wanted.has(name)) continue;
      this.board.removeQueue(name);
      this.queues.delete(name);
      await queue.close().catch((err) => this.log.warn({ err, queue: name }, 'Bull Board: could not close a removed queue'));
    }
    for (const name of wanted) {
      if (this.queues.has(name)) continue;
      const queue = new Queue(name, { connection: this.connection, prefix: this.prefix });
      // The shared connection's errors reach every queue on it; without a listener BullMQ prints each one.
      queue.on('error', (err) => this.log.debug({ err, queue: name }, 'Bull Board: queue error'));
      this.queues.set(name, queue);
      this.board.addQueue(new BullMQAdapter(queue));
    }
  }
}
