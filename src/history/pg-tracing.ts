/**
 * ElasticJob's execution traces in PostgreSQL (SHARDCRON_TRACING_PG_URL): every execution as one
 * `job_execution_log` row and its state changes as `job_status_trace_log` rows, written in batches
 * off the execution path.
 */
import { Pool, type DatabaseError } from 'pg';
import { z } from 'zod';
import { silentLogger, type Logger } from '../shared/logger';
import type { ExecutionRecord } from '../shared/registry/execution-record';
import { parseOrThrow } from '../shared/validation';
import { BatchWriter, type SendOutcome } from './batch-writer';
import { batchingSchema } from './batching-options';
import type { ExecutionHistoryWriter } from './history-events';
import { poolFor, type PgConnection } from './pg-connection';
import { insertExecutionLog, insertStatusTrace } from './trace-insert';
import { toTraceRows, type TraceOrigin } from './trace-rows';
import { CREATE_TRACE_TABLES } from './trace-schema';

const optionsSchema = z.object({
  /** This instance's host name and address, written into every execution row (ElasticJob's columns). */
  hostname: z.string().min(1).max(255),
  ip: z.string().min(1).max(64),
  batching: batchingSchema({ maxBuffered: 50_000, batchSize: 1_000, flushIntervalMs: 1_000, retryMaxMs: 10_000, closeTimeoutMs: 5_000, retryBaseMs: 200 }),
});

/** Options of {@link PgTracingWriter}: where to write (a URL, or a pool the caller owns), who writes, batching. */
export type PgTracingWriterOptions = z.input<typeof optionsSchema> & PgConnection & { logger?: Logger };

/**
 * SQLSTATE classes the same rows will fail with however often they are retried: data exceptions (22),
 * integrity violations (23), and a table of another layout (42, e.g. an undefined column).
 */
function isPermanent(err: unknown): boolean {
  const code = (err as Partial<DatabaseError>).code;
  return typeof code === 'string' && /^(22|23|42)/.test(code) && code !== UNDEFINED_TABLE;
}
const UNDEFINED_TABLE = '42P01';

/**
 * Writes ElasticJob's traces. `start()` creates the tables if they do not exist; `append()` returns
 * at once; every `flushIntervalMs` (or at every full batch) one INSERT per table writes what has
 * accumulated. While PostgreSQL is down, records wait in a bounded buffer and the batch is retried
 * with back-off: nothing is lost while the buffer has room; beyond it the oldest are dropped,
 * counted (`stats().droppedBy.overflow`), logged and emitted (`history:dropped`). The end of an
 * outage is reported with its length and the most records it buffered (`history:recovered`).
 */
export class PgTracingWriter extends BatchWriter<ExecutionRecord> implements ExecutionHistoryWriter {
  private readonly pool: Pool;
  private readonly ownsPool: boolean;
  private readonly origin: TraceOrigin;
  private schemaReady = false;
  private closingAll: Promise<void> | undefined;

  constructor(options: PgTracingWriterOptions) {
    const { pool, connectionString, logger, ...rest } = options;
    const parsed = parseOrThrow(optionsSchema, rest, 'PostgreSQL tracing options');
    super('postgres', parsed.batching, (logger ?? silentLogger).child({ component: 'pg-tracing' }));
    this.ownsPool = pool === undefined;
    this.pool = poolFor({ pool, connectionString }, 'PostgreSQL tracing options', this.logger);
    this.origin = { hostname: parsed.hostname, ip: parsed.ip };
  }

  /**
   * Creates the tables and indexes if they do not exist. A database that does not answer is not an
   * error here (history must not stop a worker): it is reported like any outage and the tables are
   * created before the first batch once it answers.
   */
  async start(): Promise<void> {
    try {
      await this.ensureSchema();
    } catch (err) {
      this.logger.warn({ err }, 'could not create the trace tables yet; will retry before the first write');
    }
  }

  /** Queues `record`; never throws, never waits. An invalid record is dropped and reported. */
  append(record: ExecutionRecord): void {
    const valid = this.validRecord(record);
    if (valid) this.enqueue(valid);
  }

  /** Writes what is buffered within the close deadline, then ends the pool if this writer made it; idempotent. */
  override close(): Promise<void> {
    return (this.closingAll ??= this.closeAll());
  }

  protected override async send(batch: readonly ExecutionRecord[]): Promise<SendOutcome<ExecutionRecord>> {
    const rows = batch.map((record) => toTraceRows(record, this.origin));
    // Outside the catch below: a schema that cannot be created yet (no grant, say) keeps the records buffered.
    if (!this.schemaReady) await this.ensureSchema();
    try {
      await this.pool.query(insertExecutionLog(rows.map((r) => r.execution)));
      await this.pool.query(insertStatusTrace(rows.flatMap((r) => r.statuses)));
      return {};
    } catch (err) {
      if ((err as Partial<DatabaseError>).code === UNDEFINED_TABLE) this.schemaReady = false;
      if (!isPermanent(err)) throw err;
      this.logger.error({ err, records: batch.length }, 'PostgreSQL refused a batch of traces; it is dropped (do the tables have another layout?)');
      return { rejected: batch.length };
    }
  }

  private async ensureSchema(): Promise<void> {
    await this.pool.query(CREATE_TRACE_TABLES);
    this.schemaReady = true;
  }

  private async closeAll(): Promise<void> {
    try {
      await super.close();
    } finally {
      if (this.ownsPool) {
        await this.pool.end().catch((err: unknown) => this.logger.warn({ err }, 'ending the PostgreSQL pool failed'));
      }
    }
  }
}
