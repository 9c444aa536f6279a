/**
 * Where a worker's execution records go besides its events: each job's recent list in Redis and,
 * with a PostgreSQL URL, ElasticJob's traces. Both write in batches off the execution path
 * (docs/history.md).
 */
import * as os from 'node:os';
import type { ExecutionHistoryWriter } from '../history/history-events';
import { RecentExecutionsWriter } from '../history/recent-executions';
import type { Logger } from '../shared/logger';
import type { RedisClient } from '../shared/redis/redis-connection';
import type { ExecutionRecord } from '../shared/registry/execution-record';

export interface WorkerHistoryOptions {
  /** Records kept per job in the recent list; default 1,000; 0: no list. */
  recentPerJob?: number;
  /** PostgreSQL of ElasticJob's traces; unset: none. */
  tracingPgUrl?: string;
}

/** The history writers of one worker. */
export class WorkerHistory {
  /** Whether `options` ask for any writer: without one the worker builds no records at all. */
  static wanted(options: WorkerHistoryOptions = {}): boolean {
    return options.recentPerJob !== 0 || options.tracingPgUrl !== undefined;
  }

  private readonly writers: ExecutionHistoryWriter[] = [];
  /** The recent list's own connection, closed after its writer. */
  private readonly redis: RedisClient | undefined;

  /**
   * `connect` makes the recent list's Redis connection, its own: on the connection the worker's
   * BullMQ consumers share for their commands, a flush's pipeline queued behind and between their
   * fetches and completions, and the list cost 9% of the no-op throughput (median of 20 paired
   * rounds of the history-cost bench).
   */
  constructor(connect: () => RedisClient, options: WorkerHistoryOptions & { namespace: string; ip: string; log: Logger }) {
    const { recentPerJob, tracingPgUrl, namespace, ip, log } = options;
    if (recentPerJob !== 0) {
      const redis = (this.redis = connect());
      this.writers.push(new RecentExecutionsWriter({ redis, namespace, logger: log, ...(recentPerJob !== undefined && { keepPerJob: recentPerJob }) }));
    }
    if (tracingPgUrl !== undefined) {
      // Loaded only with a tracing URL: pg alone adds 1.7 MB to the live heap of a worker that never
      // uses it (docs/design-notes.md, "Worker memory").
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const { PgTracingWriter } = require('../history/pg-tracing') as typeof import('../history/pg-tracing');
      const tracing = new PgTracingWriter({ connectionString: tracingPgUrl, hostname: os.hostname(), ip, logger: log });
      // Not awaited: a database that does not answer must not keep the worker from starting (the
      // tables are created before the first batch once it answers).
      void tracing.start();
      this.writers.push(tracing);
    }
  }

  /** Queues `record` with every writer; returns at once. */
  append(record: ExecutionRecord): void {
    for (const writer of this.writers) writer.append(record);
  }

  /** Writes what is buffered (within each writer's close timeout), then lets go. */
  async close(): Promise<void> {
    await Promise.allSettled(this.writers.map((w) => w.close()));
    await this.redis?.quit().catch(() => undefined);
  }
}
