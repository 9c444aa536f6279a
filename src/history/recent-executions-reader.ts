import type { Cluster, Redis } from 'ioredis';
import { z } from 'zod';
import { silentLogger, type Logger } from '../shared/logger';
import type { ExecutionRecord } from '../shared/registry/execution-record';
import { recentExecutionsKey } from '../shared/registry/redis-keys';
import { TypedEmitter } from '../shared/typed-emitter';
import { parseOrThrow } from '../shared/validation';
import type { HistoryReaderEvents } from './history-events';
import { decodeRecentEntry } from './recent-entry';

/** Most records one query may ask for. */
export const MAX_HISTORY_LIMIT = 1_000;

/** A query of the recent list: `limit` records (default 100), only item `item` if given. */
export const recentQuerySchema = z.object({
  limit: z.number().int().min(1).max(MAX_HISTORY_LIMIT).default(100),
  item: z.number().int().nonnegative().optional(),
});
export type RecentQuery = z.input<typeof recentQuerySchema>;

/** Options of {@link RecentExecutionsReader}. */
export interface RecentExecutionsReaderOptions {
  redis: Redis | Cluster;
  namespace: string;
  /**
   * Most list entries one query reads while filtering by item (default 10,000): a rare item in a long
   * list answers fewer than `limit` records rather than reading the whole list.
   */
  scanLimit?: number;
  logger?: Logger;
}

/** Entries read per round trip when a filter may skip most of them. */
const MIN_FILTER_PAGE = 100;

/**
 * Reads a job's recent list for the console: newest first, every entry decoded and validated with
 * `executionRecordSchema` (recent-entry.ts). An entry that is not a record of this job (hand-written, another
 * version) is skipped, logged and emitted as `history:corrupt`; the query goes on.
 */
export class RecentExecutionsReader extends TypedEmitter<HistoryReaderEvents> {
  private readonly scanLimit: number;
  private readonly logger: Logger;
  private skipped = 0;

  constructor(private readonly options: RecentExecutionsReaderOptions) {
    const logger = (options.logger ?? silentLogger).child({ component: 'recent-executions-reader', ns: options.namespace });
    super(logger);
    this.logger = logger;
    this.scanLimit = options.scanLimit ?? 10_000;
  }

  /** Corrupt entries skipped since creation. */
  get corruptSkipped(): number {
    return this.skipped;
  }

  /**
   * The newest `limit` records of `job` (of item `item` only, if given), newest first. Throws a
   * ConfigError naming `job`, `limit` or `item` when one is invalid.
   */
  async recent(job: string, query: RecentQuery = {}): Promise<ExecutionRecord[]> {
    const key = recentExecutionsKey(this.options.namespace, job);
    const { limit, item } = parseOrThrow(recentQuerySchema, query, 'recent executions query');
    // Without a filter only corrupt entries make a page come up short; with one, read ahead.
    const page = Math.min(item === undefined ? limit : Math.max(limit * 4, MIN_FILTER_PAGE), this.scanLimit);
    const found: ExecutionRecord[] = [];
    for (let start = 0; found.length < limit && start < this.scanLimit; start += page) {
      const stop = Math.min(start + page, this.scanLimit) - 1;
      const entries = await this.options.redis.lrange(key, start, stop);
      entries.forEach((entry, i) => {
        const record = this.parse(entry, job, key, start + i);
        if (record && (item === undefined || record.item === item) && found.length < limit) found.push(record);
      });
      if (entries.length < stop - start + 1) break;
    }
    // The list is in order of arrival; instances flush on their own timers, so two records a flush
    // interval apart may have arrived the other way round. finishedAt is the order PostgreSQL answers in.
    return found.sort((a, b) => b.finishedAt - a.finishedAt);
  }

  private parse(entry: string, job: string, key: string, index: number): ExecutionRecord | undefined {
    let problem: string;
    try {
      return decodeRecentEntry(entry, job);
    } catch (err) {
      problem = err instanceof SyntaxError ? `not JSON (${err.message})` : (err as Error).message;
    }
    this.skipped++;
    const where = `${key}[${index}]`;
    this.logger.warn({ job, where, problem }, 'skipped a corrupt entry of the recent list');
    this.emit('history:corrupt', { store: 'redis', job, where, problem });
    return undefined;
  }
}
