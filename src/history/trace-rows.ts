/**
 * ExecutionRecord <-> ElasticJob's trace rows (`job_execution_log`, `job_status_trace_log`), pure.
 * One execution is one execution-log row and its state changes are status-trace rows:
 * TASK_RUNNING at `startedAt` (not for a skipped execution, which never started) and the final state
 * at `finishedAt`. Both are written once the execution has ended: the item runner hands over one
 * record per execution.
 */
import { createHash } from 'node:crypto';
import { ExecutionSources, type ExecutionSource } from '../shared/registry/execution-request';
import type { ExecutionRecord, ExecutionRecordStatus } from '../shared/registry/execution-record';

/** ElasticJob's separator inside a task id. */
export const TASK_ID_SEPARATOR = '@-@';

/** The ElasticJob state that ends an execution of each status; one state per status, so it reads back. */
export const FINAL_STATES = {
  completed: 'TASK_FINISHED',
  failed: 'TASK_ERROR', // the handler threw or reported failure: ElasticJob-Lite's TASK_ERROR
  timeout: 'TASK_FAILED', // it did not finish in `timeoutMs` and was aborted
  aborted: 'TASK_KILLED', // shardcron stopped it: session lost, shutdown
  skipped: 'TASK_DROPPED', // it never ran (e.g. the item was already running)
} as const satisfies Record<ExecutionRecordStatus, string>;

/** States written to `job_status_trace_log.state`. */
export type TraceState = 'TASK_RUNNING' | (typeof FINAL_STATES)[ExecutionRecordStatus];

/** `execution_source` values: ElasticJob's names (NORMAL_TRIGGER, MISFIRE, FAILOVER) plus TRIGGER for manual runs. */
export const TRACE_SOURCES = {
  NORMAL: 'NORMAL_TRIGGER',
  MISFIRE: 'MISFIRE',
  FAILOVER: 'FAILOVER',
  TRIGGER: 'TRIGGER',
} as const satisfies Record<ExecutionSource, string>;

/** Who wrote the rows: the worker instance's host (ElasticJob's hostname and ip columns). */
export interface TraceOrigin {
  hostname: string;
  ip: string;
}

/** One `job_execution_log` row; times in epoch ms. */
export interface ExecutionLogRow {
  id: string;
  job_name: string;
  task_id: string;
  hostname: string;
  ip: string;
  sharding_item: number;
  execution_source: string;
  failure_cause: string | null;
  is_success: boolean;
  start_time: number;
  complete_time: number;
}

/** One `job_status_trace_log` row; `sharding_item` is text, as in ElasticJob (a list of items there). */
export interface StatusTraceRow {
  id: string;
  job_name: string;
  original_task_id: string;
  task_id: string;
  slave_id: string;
  execution_type: 'READY' | 'FAILOVER';
  sharding_item: string;
  state: TraceState;
  message: string;
  creation_time: number;
}

/** Most characters of a status message (ElasticJob's column is VARCHAR(4000)). */
const MAX_MESSAGE_CHARS = 4_000;

/** `job@-@fireTime@-@item@-@instanceId`: ElasticJob's task id shape, naming one execution's fire and item. */
export function traceTaskId(record: Pick<ExecutionRecord, 'job' | 'fireTime' | 'item' | 'instanceId'>): string {
  return [record.job, record.fireTime, record.item, record.instanceId].join(TASK_ID_SEPARATOR);
}

/** The parts of a task id {@link traceTaskId} made, or undefined for any other id. */
export function parseTaskId(taskId: string): Pick<ExecutionRecord, 'job' | 'fireTime' | 'item' | 'instanceId'> | undefined {
  // Job names cannot hold '@', instance ids can (`ip@-@pid`): the instance id is all that follows the item.
  const [job, fireTime, item, ...instance] = taskId.split(TASK_ID_SEPARATOR);
  if (!job || !/^\d{1,15}$/.test(fireTime ?? '') || !/^\d{1,9}$/.test(item ?? '') || instance.length === 0) return undefined;
  return { job, fireTime: Number(fireTime), item: Number(item), instanceId: instance.join(TASK_ID_SEPARATOR) };
}

/** A UUID-shaped id (ElasticJob's ids are UUIDs) derived from `parts`, so a retried batch inserts nothing twice. */
function stableId(...parts: (string | number)[]): string {
  const hex = createHash('sha1').update(parts.join('\u0000')).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-5${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/** `failure_cause`: ElasticJob keeps the exception's text there; ours is `Name: message`. */
function failureCause(record: ExecutionRecord): string | null {
  return record.error ? `${record.error.name}: ${record.error.message}` : null;
}

/**
 * The final status row's message, in a fixed form that {@link parseFinalMessage} reads back:
 * `<status> after <n> attempt(s) in <d> ms[ (exit code X)][ (HTTP S)][ (processed P, failed F)][: reason]`.
 */
export function finalMessage(record: ExecutionRecord): string {
  let text = `${record.status} after ${record.attempts} attempt${record.attempts === 1 ? '' : 's'} in ${record.durationMs} ms`;
  if (record.exitCode !== undefined) text += ` (exit code ${record.exitCode})`;
  if (record.httpStatus !== undefined) text += ` (HTTP ${record.httpStatus})`;
  if (record.processed !== undefined || record.failed !== undefined) {
    text += ` (processed ${record.processed ?? 0}, failed ${record.failed ?? 0})`;
  }
  if (record.reason !== undefined) text += `: ${record.reason}`;
  return text.length > MAX_MESSAGE_CHARS ? `${text.slice(0, MAX_MESSAGE_CHARS - 3)}...` : text;
}

const FINAL_MESSAGE =
  /^(\w+) after (\d+) attempts? in (\d+) ms(?: \(exit code (-?\d+)\))?(?: \(HTTP (\d+)\))?(?: \(processed (\d+), failed (\d+)\))?(?:: ([\s\S]*))?$/;

/** The record fields a {@link finalMessage} carries, or undefined for any other text. */
export function parseFinalMessage(message: string): Partial<ExecutionRecord> | undefined {
  const match = FINAL_MESSAGE.exec(message);
  if (!match) return undefined;
  const [, , attempts, durationMs, exitCode, httpStatus, processed, failed, reason] = match;
  const number = (text: string | undefined) => (text === undefined ? undefined : Number(text));
  const fields: Partial<ExecutionRecord> = {
    attempts: Number(attempts),
    durationMs: Number(durationMs),
    exitCode: number(exitCode),
    httpStatus: number(httpStatus),
    processed: number(processed),
    failed: number(failed),
    reason,
  };
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined));
}

/** The rows one ExecutionRecord becomes, written by `origin`. */
export function toTraceRows(record: ExecutionRecord, origin: TraceOrigin): { execution: ExecutionLogRow; statuses: StatusTraceRow[] } {
  const taskId = traceTaskId(record);
  const id = stableId(taskId, record.source, record.startedAt, record.finishedAt);
  const execution: ExecutionLogRow = {
    id,
    job_name: record.job,
    task_id: taskId,
    hostname: origin.hostname,
    ip: origin.ip,
    sharding_item: record.item,
    execution_source: TRACE_SOURCES[record.source],
    failure_cause: failureCause(record),
    is_success: record.status === 'completed',
    start_time: record.startedAt,
    complete_time: record.finishedAt,
  };
  const status = (state: TraceState, message: string, at: number): StatusTraceRow => ({
    id: stableId(id, state),
    job_name: record.job,
    // ElasticJob names the task a failover replaced here; the record does not say which instance that was.
    original_task_id: '',
    task_id: taskId,
    slave_id: record.instanceId,
    execution_type: record.source === 'FAILOVER' ? 'FAILOVER' : 'READY',
    sharding_item: String(record.item),
    state,
    message,
    creation_time: at,
  });
  const statuses = [status(FINAL_STATES[record.status], finalMessage(record), record.finishedAt)];
  if (record.status !== 'skipped') {
    statuses.unshift(status('TASK_RUNNING', `started fire ${new Date(record.fireTime).toISOString()} (${record.source})`, record.startedAt));
  }
  return { execution, statuses };
}

/** The source an `execution_source` value stands for, or undefined for a value shardcron does not write. */
export function sourceOf(executionSource: string): ExecutionSource | undefined {
  return ExecutionSources.find((source) => TRACE_SOURCES[source] === executionSource);
}

/** The status a final state stands for, or undefined for a state shardcron does not write. */
export function statusOf(state: string): ExecutionRecordStatus | undefined {
  return (Object.keys(FINAL_STATES) as ExecutionRecordStatus[]).find((status) => FINAL_STATES[status] === state);
}
