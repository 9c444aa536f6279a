/**
 * Trace rows read back as the console's ExecutionRecord, pure. Rows shardcron wrote carry every
 * field (the final status message holds what ElasticJob has no column for); rows written by another
 * tool lack `attempts` and the type-specific fields.
 */
import { z } from 'zod';
import { executionRecordSchema, type ExecutionRecord } from '../shared/registry/execution-record';
import { toFieldIssues } from '../shared/validation';
import { parseFinalMessage, parseTaskId, sourceOf, statusOf, type ExecutionLogRow } from './trace-rows';

/** An ExecutionRecord read from the traces, with the trace's own ids. */
export const tracedExecutionSchema = executionRecordSchema.extend({
  /** Absent when the final status row is missing or was not written by shardcron. */
  attempts: z.number().int().nonnegative().optional(),
  taskId: z.string(),
  /** The host that wrote the row (the instance that ran the execution). */
  hostname: z.string(),
  ip: z.string(),
});
export type TracedExecution = z.output<typeof tracedExecutionSchema>;

/** A `job_execution_log` row as the reader selects it (times as node-postgres parses them), with its final status row's state and message. */
export type TracedExecutionRow = Omit<ExecutionLogRow, 'id' | 'start_time' | 'complete_time'> & {
  start_time: Date;
  complete_time: Date;
  state: string | null;
  message: string | null;
};

/** `Name: message` (as the writer wrote failure_cause) back to `{ name, message }`. */
function errorOf(failureCause: string): NonNullable<ExecutionRecord['error']> {
  const colon = failureCause.indexOf(': ');
  return colon < 0 ? { name: 'Error', message: failureCause } : { name: failureCause.slice(0, colon), message: failureCause.slice(colon + 2) };
}

/** The execution a row stands for, or `{ problem }` saying why the row is not one shardcron can read. */
export function tracedExecutionFromRow(row: TracedExecutionRow): TracedExecution | { problem: string } {
  const ids = parseTaskId(row.task_id);
  if (!ids) return { problem: `task_id ${JSON.stringify(row.task_id)} is not job@-@fireTime@-@item@-@instanceId` };
  const source = sourceOf(row.execution_source);
  if (!source) return { problem: `execution_source ${JSON.stringify(row.execution_source)} is not one shardcron writes` };
  const startedAt = row.start_time.getTime();
  const finishedAt = row.complete_time.getTime();
  const details = row.message === null ? undefined : parseFinalMessage(row.message);
  const candidate = {
    job: row.job_name,
    item: row.sharding_item,
    fireTime: ids.fireTime,
    source,
    instanceId: ids.instanceId,
    status: (row.state === null ? undefined : statusOf(row.state)) ?? (row.is_success ? 'completed' : 'failed'),
    startedAt,
    finishedAt,
    durationMs: Math.max(0, finishedAt - startedAt),
    ...details,
    ...(row.failure_cause === null ? {} : { error: errorOf(row.failure_cause) }),
    taskId: row.task_id,
    hostname: row.hostname,
    ip: row.ip,
  };
  const result = tracedExecutionSchema.safeParse(candidate);
  if (result.success) return result.data;
  return { problem: toFieldIssues(result.error).map((i) => `${i.field}: ${i.message}`).join('; ') };
}
