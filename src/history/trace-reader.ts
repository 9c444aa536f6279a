import type { Pool } from 'pg';
import { z } from 'zod';
import { silentLogger, type Logger } from '../shared/logger';
import { assertJobName } from '../shared/registry/registry-paths';
import { TypedEmitter } from '../shared/typed-emitter';
import { parseOrThrow } from '../shared/validation';
import type { HistoryReaderEvents } from './history-events';
import { poolFor, type PgConnection } from './pg-connection';
import { MAX_HISTORY_LIMIT } from './recent-executions-reader';
import { tracedExecutionFromRow, type TracedExecution, type TracedExecutionRow } from './traced-execution';
import { EXECUTION_LOG_TABLE, STATUS_TRACE_TABLE } from './trace-schema';

/** A query of the traces: `limit` records (default 100), of item `item` only, finished before `before` (epoch ms). */
export const traceQuerySchema = z.object({
  limit: z.number().int().min(1).max(MAX_HISTORY_LIMIT).default(100),
  item: z.number().int().nonnegative().optional(),
  before: z.number().int().nonnegative().optional(),
});
export type TraceQuery = z.input<typeof traceQuerySchema>;

/** Options of {@link PgTraceReader}: the database (a URL, or a pool the caller owns) and a logger. */
export type PgTraceReaderOptions = PgConnection & { logger?: Logger };

/**
 * Reads the console's older records from ElasticJob's traces: a job's executions, newest
 * (`complete_time`) first, each with the state and message of its final status row. Page back with
 * `before` = the oldest `finishedAt` seen. A row that cannot be read as a record is skipped, logged
 * and emitted as `history:corrupt`.
 */
export class PgTraceReader extends TypedEmitter<HistoryReaderEvents> {
  private readonly pool: Pool;
  private readonly ownsPool: boolean;
  private readonly logger: Logger;
  private closing: Promise<void> | undefined;

  constructor(options: PgTraceReaderOptions) {
    const logger = (options.logger ?? silentLogger).child({ component: 'pg-trace-reader' });
    super(logger);
    this.logger = logger;
    this.ownsPool = options.pool === undefined;
    this.pool = poolFor(options, 'PostgreSQL trace reader options', logger);
  }

  /**
   * The newest `limit` executions of `job` (of item `item`, finished before `before`), newest first.
   * Throws a ConfigError naming `job`, `limit`, `item` or `before` when one is invalid, and the
   * database's error when it cannot answer.
   */
  async executions(job: string, query: TraceQuery = {}): Promise<TracedExecution[]> {
    assertJobName(job, 'job');
    const { limit, item, before } = parseOrThrow(traceQuerySchema, query, 'trace query');
    const values: unknown[] = [job];
    const where = ['e.job_name = $1', 'e.complete_time IS NOT NULL'];
    if (item !== undefined) where.push(`e.sharding_item = $${values.push(item)}`);
    if (before !== undefined) where.push(`e.complete_time < $${values.push(new Date(before).toISOString())}`);
    // The final status row is the one written at the execution's end: same task, same time, not RUNNING.
    const { rows } = await this.pool.query<TracedExecutionRow>(
      `SELECT e.job_name, e.task_id, e.hostname, e.ip, e.sharding_item, e.execution_source, e.failure_cause,
              e.is_success, e.start_time, e.complete_time, s.state, s.message
         FROM ${EXECUTION_LOG_TABLE} e
         LEFT JOIN LATERAL (
           SELECT t.state, t.message FROM ${STATUS_TRACE_TABLE} t
            WHERE t.task_id = e.task_id AND t.creation_time = e.complete_time AND t.state <> 'TASK_RUNNING'
            LIMIT 1) s ON true
        WHERE ${where.join(' AND ')}
        ORDER BY e.complete_time DESC, e.id DESC
        LIMIT $${values.push(limit)}`,
      values,
    );
    return rows.flatMap((row) => {
      const traced = tracedExecutionFromRow(row);
      if (!('problem' in traced)) return [traced];
      const where = `${EXECUTION_LOG_TABLE} task_id ${JSON.stringify(row.task_id)}`;
      this.logger.warn({ job, where, problem: traced.problem }, 'skipped a trace row that is not a shardcron execution');
      this.emit('history:corrupt', { store: 'postgres', job, where, problem: traced.problem });
      return [];
    });
  }

  /** Ends the pool if this reader made it; idempotent. */
  close(): Promise<void> {
    return (this.closing ??= this.ownsPool ? this.pool.end() : Promise.resolve());
  }

  /** Same as {@link close}, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
