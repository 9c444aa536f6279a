/**
 * One INSERT per table per batch: each column goes as one array parameter and UNNEST turns the arrays
 * back into rows, so a batch of any size binds as many parameters as the table has columns (node-postgres
 * and PostgreSQL cap a statement at 65,535 parameters; a row per VALUES tuple would hit it at ~6,000 rows).
 */
import type { QueryConfig } from 'pg';
import { EXECUTION_LOG_TABLE, STATUS_TRACE_TABLE } from './trace-schema';
import type { ExecutionLogRow, StatusTraceRow } from './trace-rows';

type ColumnType = 'text' | 'integer' | 'boolean' | 'timestamptz';
type Columns<R> = readonly (readonly [keyof R & string, ColumnType])[];

const EXECUTION_LOG_COLUMNS: Columns<ExecutionLogRow> = [
  ['id', 'text'], ['job_name', 'text'], ['task_id', 'text'], ['hostname', 'text'], ['ip', 'text'],
  ['sharding_item', 'integer'], ['execution_source', 'text'], ['failure_cause', 'text'], ['is_success', 'boolean'],
  ['start_time', 'timestamptz'], ['complete_time', 'timestamptz'],
];

const STATUS_TRACE_COLUMNS: Columns<StatusTraceRow> = [
  ['id', 'text'], ['job_name', 'text'], ['original_task_id', 'text'], ['task_id', 'text'], ['slave_id', 'text'],
  ['execution_type', 'text'], ['sharding_item', 'text'], ['state', 'text'], ['message', 'text'], ['creation_time', 'timestamptz'],
];

function unnestInsert<R>(table: string, columns: Columns<R>, rows: readonly R[]): QueryConfig {
  const names = columns.map(([column]) => column).join(', ');
  const arrays = columns.map(([, type], i) => `$${i + 1}::${type}[]`).join(', ');
  return {
    // Named: the text never changes, so each connection parses and plans it once.
    name: `shardcron-insert-${table}`,
    // Ids are derived from the record: a batch retried after a lost answer inserts nothing twice.
    text: `INSERT INTO ${table} (${names}) SELECT * FROM UNNEST(${arrays}) ON CONFLICT (id) DO NOTHING`,
    values: columns.map(([column, type]) =>
      rows.map((row) => (type === 'timestamptz' ? new Date(row[column] as number).toISOString() : row[column])),
    ),
  };
}

/** The INSERT of a batch of `job_execution_log` rows. */
export function insertExecutionLog(rows: readonly ExecutionLogRow[]): QueryConfig {
  return unnestInsert(EXECUTION_LOG_TABLE, EXECUTION_LOG_COLUMNS, rows);
}

/** The INSERT of a batch of `job_status_trace_log` rows. */
export function insertStatusTrace(rows: readonly StatusTraceRow[]): QueryConfig {
  return unnestInsert(STATUS_TRACE_TABLE, STATUS_TRACE_COLUMNS, rows);
}
