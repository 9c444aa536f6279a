/** ExecutionRecord <-> ElasticJob trace rows, and the statements a batch becomes. */
import { insertExecutionLog, insertStatusTrace } from '../../src/history/trace-insert';
import { finalMessage, parseFinalMessage, parseTaskId, toTraceRows, traceTaskId } from '../../src/history/trace-rows';
import { tracedExecutionFromRow, type TracedExecutionRow } from '../../src/history/traced-execution';
import type { ExecutionRecord } from '../../src/shared/registry/execution-record';
import { executionRecord, T0 } from '../helpers/execution-records';

const ORIGIN = { hostname: 'worker-7', ip: '10.0.0.7' };

/** The row the reader would select for `record`, as PostgreSQL returns it. */
function readBack(record: ExecutionRecord): TracedExecutionRow {
  const { execution, statuses } = toTraceRows(record, ORIGIN);
  const final = statuses.at(-1)!;
  return {
    ...execution,
    start_time: new Date(execution.start_time),
    complete_time: new Date(execution.complete_time),
    state: final.state,
    message: final.message,
  };
}

describe('trace task ids', () => {
  it('name job, fire, item and instance, and read back an instance id that holds the separator itself', () => {
    const record = executionRecord({ item: 3, instanceId: '10.0.0.7@-@4242' });
    const taskId = traceTaskId(record);
    expect(taskId).toBe(`billing@-@${T0}@-@3@-@10.0.0.7@-@4242`);
    expect(parseTaskId(taskId)).toEqual({ job: 'billing', fireTime: T0, item: 3, instanceId: '10.0.0.7@-@4242' });
  });

  it('are not read from ids of another shape (ElasticJob: job@-@items@-@type@-@ip@-@uuid)', () => {
    expect(parseTaskId('billing@-@0,1@-@READY@-@10.0.0.7@-@1a2b')).toBeUndefined();
    expect(parseTaskId('billing')).toBeUndefined();
  });
});

describe('toTraceRows', () => {
  it('makes one execution-log row and RUNNING plus FINISHED status rows for a completed execution', () => {
    const record = executionRecord({ item: 2 });
    const { execution, statuses } = toTraceRows(record, ORIGIN);
    expect(execution).toEqual({
      id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-8[0-9a-f]{3}-[0-9a-f]{12}$/),
      job_name: 'billing',
      task_id: traceTaskId(record),
      hostname: 'worker-7',
      ip: '10.0.0.7',
      sharding_item: 2,
      execution_source: 'NORMAL_TRIGGER',
      failure_cause: null,
      is_success: true,
      start_time: record.startedAt,
      complete_time: record.finishedAt,
    });
    expect(statuses.map((s) => [s.state, s.creation_time, s.execution_type, s.sharding_item, s.slave_id])).toEqual([
      ['TASK_RUNNING', record.startedAt, 'READY', '2', record.instanceId],
      ['TASK_FINISHED', record.finishedAt, 'READY', '2', record.instanceId],
    ]);
    expect(statuses[1].message).toBe('completed after 1 attempt in 120 ms');
  });

  it('gives each status its own final state, and a skipped execution no RUNNING row', () => {
    const states = (['completed', 'failed', 'timeout', 'aborted', 'skipped'] as const).map((status) =>
      toTraceRows(executionRecord({ status }), ORIGIN).statuses.map((s) => s.state),
    );
    expect(states).toEqual([
      ['TASK_RUNNING', 'TASK_FINISHED'],
      ['TASK_RUNNING', 'TASK_ERROR'],
      ['TASK_RUNNING', 'TASK_FAILED'],
      ['TASK_RUNNING', 'TASK_KILLED'],
      ['TASK_DROPPED'],
    ]);
  });

  it('writes a failure as failure_cause and is_success false, a failover as execution type FAILOVER', () => {
    const record = executionRecord({ status: 'failed', source: 'FAILOVER', error: { name: 'TypeError', message: 'x is: undefined' } });
    const { execution, statuses } = toTraceRows(record, ORIGIN);
    expect(execution).toMatchObject({ failure_cause: 'TypeError: x is: undefined', is_success: false, execution_source: 'FAILOVER' });
    expect(statuses.every((s) => s.execution_type === 'FAILOVER')).toBe(true);
  });

  it('derives ids from the execution, so a retried batch has the same ids, and two executions differ', () => {
    const record = executionRecord();
    const again = toTraceRows({ ...record }, ORIGIN);
    const first = toTraceRows(record, ORIGIN);
    expect(again.execution.id).toBe(first.execution.id);
    expect(again.statuses.map((s) => s.id)).toEqual(first.statuses.map((s) => s.id));
    expect(new Set(first.statuses.map((s) => s.id)).size).toBe(2);
    const misfireRun = toTraceRows({ ...record, source: 'MISFIRE', startedAt: record.finishedAt + 1, finishedAt: record.finishedAt + 50 }, ORIGIN);
    expect(misfireRun.execution.id).not.toBe(first.execution.id);
  });
});

describe('final status message', () => {
  it('carries what ElasticJob has no column for, and reads back', () => {
    const record = executionRecord({
      status: 'timeout', attempts: 3, durationMs: 30_000, exitCode: -1, httpStatus: 504, processed: 10, failed: 2,
      reason: 'timed out after 30000 ms: still waiting: for the lock',
    });
    const message = finalMessage(record);
    expect(message).toBe('timeout after 3 attempts in 30000 ms (exit code -1) (HTTP 504) (processed 10, failed 2): timed out after 30000 ms: still waiting: for the lock');
    expect(parseFinalMessage(message)).toEqual({
      attempts: 3, durationMs: 30_000, exitCode: -1, httpStatus: 504, processed: 10, failed: 2,
      reason: 'timed out after 30000 ms: still waiting: for the lock',
    });
  });

  it('is not read from text of another shape', () => {
    expect(parseFinalMessage("Job 'billing' execute finished.")).toBeUndefined();
  });
});

describe('tracedExecutionFromRow', () => {
  it.each([
    ['completed', executionRecord()],
    ['failed', executionRecord({ status: 'failed', attempts: 2, error: { name: 'Error', message: 'boom' } })],
    ['timeout', executionRecord({ status: 'timeout', reason: 'timeoutMs 100 passed' })],
    ['aborted', executionRecord({ status: 'aborted', source: 'FAILOVER', reason: 'session lost' })],
    ['skipped', executionRecord({ status: 'skipped', attempts: 0, durationMs: 0, reason: 'item already running', source: 'MISFIRE' })],
    ['triggered SCRIPT', executionRecord({ source: 'TRIGGER', exitCode: 0 })],
  ])('reads a %s execution back as the record it was written from', (_, record) => {
    expect(tracedExecutionFromRow(readBack(record))).toEqual({
      ...record,
      taskId: traceTaskId(record),
      hostname: 'worker-7',
      ip: '10.0.0.7',
    });
  });

  it('reads a row whose final status row is missing from is_success, without attempts', () => {
    const record = executionRecord({ status: 'failed', error: { name: 'Error', message: 'boom' } });
    const traced = tracedExecutionFromRow({ ...readBack(record), state: null, message: null });
    expect(traced).toMatchObject({ status: 'failed', error: { name: 'Error', message: 'boom' }, durationMs: 120 });
    expect(traced).not.toHaveProperty('attempts');
  });

  it('names the problem with a row shardcron did not write', () => {
    const row = { ...readBack(executionRecord()), task_id: 'billing@-@0,1@-@READY@-@10.0.0.7@-@1a2b' };
    expect(tracedExecutionFromRow(row)).toEqual({ problem: expect.stringContaining('task_id') });
    expect(tracedExecutionFromRow({ ...readBack(executionRecord()), execution_source: 'CRON' })).toEqual({
      problem: expect.stringContaining('execution_source'),
    });
  });
});

describe('batch INSERTs', () => {
  it('bind one array per column however many rows the batch has (65,535 parameters are the cap)', () => {
    const rows = Array.from({ length: 10_000 }, (_, i) => toTraceRows(executionRecord({ item: i }), ORIGIN));
    const executions = insertExecutionLog(rows.map((r) => r.execution));
    const statuses = insertStatusTrace(rows.flatMap((r) => r.statuses));
    expect(executions.values).toHaveLength(11);
    expect(statuses.values).toHaveLength(10);
    expect((executions.values as unknown[][]).every((column) => column.length === 10_000)).toBe(true);
    expect((statuses.values as unknown[][]).every((column) => column.length === 20_000)).toBe(true);
    expect(executions.text).toMatch(/^INSERT INTO job_execution_log \(id, job_name, .*\) SELECT \* FROM UNNEST\(\$1::text\[\], .*\$11::timestamptz\[\]\) ON CONFLICT \(id\) DO NOTHING$/);
    expect(statuses.text).toContain('INSERT INTO job_status_trace_log (id, job_name, original_task_id, task_id, slave_id, execution_type, sharding_item, state, message, creation_time)');
  });

  it('sends times as UTC ISO strings, so no zone is guessed', () => {
    const { execution } = toTraceRows(executionRecord(), ORIGIN);
    const start = (insertExecutionLog([execution]).values as unknown[][])[9];
    expect(start).toEqual(['2026-01-02T03:04:05.005Z']);
  });
});
