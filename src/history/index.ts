/**
 * Execution history: the recent list per job in Redis (the console's first page) and ElasticJob's
 * traces in PostgreSQL (everything, with SHARDCRON_TRACING_PG_URL). See docs/history.md.
 */
export { RecentExecutionsWriter, DEFAULT_RECENT_PER_JOB, type RecentExecutionsWriterOptions } from './recent-executions';
export { RecentExecutionsReader, MAX_HISTORY_LIMIT, recentQuerySchema, type RecentQuery, type RecentExecutionsReaderOptions } from './recent-executions-reader';
export { PgTracingWriter, type PgTracingWriterOptions } from './pg-tracing';
export { PgTraceReader, traceQuerySchema, type TraceQuery, type PgTraceReaderOptions } from './trace-reader';
export { tracedExecutionSchema, type TracedExecution } from './traced-execution';
export { FINAL_STATES, TRACE_SOURCES, traceTaskId, parseTaskId, type TraceOrigin } from './trace-rows';
export { EXECUTION_LOG_TABLE, STATUS_TRACE_TABLE } from './trace-schema';
export type { PgConnection } from './pg-connection';
export type { BatchingOptions } from './batch-writer';
export type {
  DropReason,
  ExecutionHistoryWriter,
  HistoryReaderEvents,
  HistoryStore,
  HistoryWriterEvents,
  HistoryWriterStats,
} from './history-events';
