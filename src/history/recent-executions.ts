/**
 * The recent list: each job's last N ExecutionRecords in one Redis list (newest first), which the
 * console answers `GET /api/jobs/:name/executions` from. Written in batches off the execution path.
 */
import type { Cluster, Redis } from 'ioredis';
import { z } from 'zod';
import { silentLogger, type Logger } from '../shared/logger';
import type { ExecutionRecord } from '../shared/registry/execution-record';
import { recentExecutionsKey } from '../shared/registry/redis-keys';
import { parseOrThrow } from '../shared/validation';
import { BatchWriter, type SendOutcome } from './batch-writer';
import type { ExecutionHistoryWriter } from './history-events';
import { batchingSchema } from './batching-options';
import { encodeRecentEntry } from './recent-entry';

/** Records kept per job unless configured otherwise. */
export const DEFAULT_RECENT_PER_JOB = 1_000;

const optionsSchema = z.object({
  namespace: z.string().min(1).regex(/^[^{}]+$/, 'must not contain { or } (it goes inside a Redis Cluster hash tag)'),
  /** Records kept per job: older ones are trimmed at every write. */
  keepPerJob: z.number().int().min(1).max(1_000_000).default(DEFAULT_RECENT_PER_JOB),
  /**
   * Expiry of a job's list, renewed at every write: the list of a job nobody runs any more goes
   * away. Must be longer than the job's longest gap between executions. Absent: lists never expire.
   */
  ttlMs: z.number().int().min(1_000).optional(),
  /**
   * Short-lived batches: at thousands of records a second a record waiting 200 ms for its flush
   * outlived the young generation and cost the garbage collector more than its write; 20 ms and 100
   * records halved the list's cost in the throughput bench (docs/history.md).
   */
  batching: batchingSchema({ maxBuffered: 10_000, batchSize: 100, flushIntervalMs: 20, retryMaxMs: 2_000, closeTimeoutMs: 2_000 }),
});

/** Options of {@link RecentExecutionsWriter} (defaults in the schema above). */
export type RecentExecutionsWriterOptions = z.input<typeof optionsSchema> & {
  /** A connection the caller owns (not closed here); commands are only sent while it is `ready`. */
  redis: Redis | Cluster;
  logger?: Logger;
};

/** One buffered record: its list and its JSON, made at append time so the buffer holds plain strings. */
interface Entry {
  key: string;
  json: string;
}

/** Errors Redis will answer again however often the write is retried. */
const PERMANENT_REDIS_ERRORS = /^(WRONGTYPE|ERR)/;

/**
 * Appends ExecutionRecords to each job's recent list. `append()` returns at once; records are
 * written every `flushIntervalMs` (or as soon as a batch is full) in one pipeline: LPUSH, LTRIM to
 * `keepPerJob` (and PEXPIRE with `ttlMs`) per job touched. While Redis is unreachable records wait
 * in a bounded buffer (oldest dropped first, counted, logged and emitted as `history:dropped`).
 */
export class RecentExecutionsWriter extends BatchWriter<Entry> implements ExecutionHistoryWriter {
  private readonly redis: Redis | Cluster;
  private readonly namespace: string;
  private readonly keepPerJob: number;
  private readonly ttlMs: number | undefined;

  constructor(options: RecentExecutionsWriterOptions) {
    const { redis, logger, ...rest } = options;
    const parsed = parseOrThrow(optionsSchema, rest, 'recent executions writer options');
    super('redis', parsed.batching, (logger ?? silentLogger).child({ component: 'recent-executions', ns: parsed.namespace }));
    this.redis = redis;
    this.namespace = parsed.namespace;
    this.keepPerJob = parsed.keepPerJob;
    this.ttlMs = parsed.ttlMs;
  }

  /**
   * Queues `record` for its job's list; never throws, never waits. The record is trusted to be valid
   * (the worker builds it from a validated request; a zod parse here cost a copy of every record on a
   * hot path) and is stored in its compact form (recent-entry.ts); the reader validates what it reads.
   * A job name that cannot make a key is dropped and reported.
   */
  append(record: ExecutionRecord): void {
    let key: string;
    try {
      key = recentExecutionsKey(this.namespace, record.job);
    } catch (err) {
      return this.dropInvalid(err, record);
    }
    this.enqueue({ key, json: encodeRecentEntry(record) });
  }

  protected override isReady(): boolean {
    return this.redis.status === 'ready';
  }

  protected override async send(batch: readonly Entry[]): Promise<SendOutcome<Entry>> {
    const byKey = new Map<string, string[]>();
    for (const { key, json } of batch) {
      const list = byKey.get(key);
      if (list) list.push(json);
      else byKey.set(key, [json]);
    }
    const pipeline = this.redis.pipeline();
    const perKey = this.ttlMs === undefined ? 2 : 3;
    for (const [key, jsons] of byKey) {
      // LPUSH pushes its arguments one after another to the head: the last (newest) ends up first.
      pipeline.lpush(key, ...jsons).ltrim(key, 0, this.keepPerJob - 1);
      if (this.ttlMs !== undefined) pipeline.pexpire(key, this.ttlMs);
    }
    const replies = await pipeline.exec();
    if (!replies) throw new Error('Redis discarded the pipeline');
    const retry: Entry[] = [];
    let rejected = 0;
    [...byKey].forEach(([key, jsons], i) => {
      const [pushError, ...otherErrors] = replies.slice(i * perKey, (i + 1) * perKey).map(([err]) => err);
      if (pushError && PERMANENT_REDIS_ERRORS.test(pushError.message)) {
        rejected += jsons.length;
        this.logger.error({ err: pushError, key }, `Redis refused the recent list ${key}; its records are dropped`);
      } else if (pushError) {
        retry.push(...jsons.map((json) => ({ key, json })));
      } else if (otherErrors.some(Boolean)) {
        // The records are in; the list may hold more than keepPerJob until the next write trims it.
        this.logger.warn({ err: otherErrors.find(Boolean), key }, 'trimming or expiring a recent list failed');
      }
    });
    return { retry, rejected };
  }
}
