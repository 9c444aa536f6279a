/**
 * ElasticJob's traces against a real PostgreSQL: tables created on start, rows in both tables, one
 * INSERT per table per batch, an outage that loses nothing and is reported, an overflow that is
 * counted, and the reader's newest-first answers.
 */
import { Client } from 'pg';
import { PostgresServer } from '../../src/dev/postgres-server';
import { PgTracingWriter, type PgTracingWriterOptions } from '../../src/history/pg-tracing';
import { PgTraceReader } from '../../src/history/trace-reader';
import { executionRecord, executionSeries, T0 } from '../helpers/execution-records';
import { recordHistoryEvents } from '../helpers/history-events';
import { expectNoLiveServices, waitFor } from '../helpers/services';

let server: PostgresServer;
let databases = 0;
const closables: { close(): Promise<void> }[] = [];

beforeAll(async () => {
  // pg_stat_statements counts statements by text: how the test tells one INSERT per batch from many.
  server = await PostgresServer.start({ settings: { shared_preload_libraries: 'pg_stat_statements' } });
});
afterEach(async () => {
  await Promise.all(closables.splice(0).reverse().map((c) => c.close()));
});
afterAll(async () => {
  await server?.close();
  expectNoLiveServices();
});

/** A new empty database; its URL. (Tests restart the server: no client is kept across them.) */
async function freshDatabase(): Promise<string> {
  const name = `traces_${process.pid}_${++databases}`;
  await query(server.url, `CREATE DATABASE ${name}`);
  return server.url.replace(/\/postgres$/, `/${name}`);
}

async function query<R extends object>(url: string, text: string, values: unknown[] = []): Promise<R[]> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

function tracingWriter(connectionString: string, options: Partial<PgTracingWriterOptions> = {}): PgTracingWriter {
  const writer = new PgTracingWriter({ connectionString, hostname: 'worker-7', ip: '10.0.0.7', ...options } as PgTracingWriterOptions);
  closables.push(writer);
  return writer;
}

function traceReader(connectionString: string): PgTraceReader {
  const reader = new PgTraceReader({ connectionString });
  closables.push(reader);
  return reader;
}

const count = async (url: string, table: string) => Number((await query<{ n: string }>(url, `SELECT count(*) AS n FROM ${table}`))[0].n);

describe('PostgreSQL traces (real PostgreSQL)', () => {
  it('creates ElasticJob\'s two tables on start, with its columns, and starts again over them', async () => {
    const url = await freshDatabase();
    await tracingWriter(url).start();
    await tracingWriter(url).start();
    const columns = await query<{ table_name: string; column_name: string; data_type: string }>(
      url,
      `SELECT table_name, column_name, data_type FROM information_schema.columns
        WHERE table_name IN ('job_execution_log', 'job_status_trace_log') ORDER BY table_name, ordinal_position`,
    );
    const of = (table: string) => columns.filter((c) => c.table_name === table).map((c) => c.column_name);
    expect(of('job_execution_log')).toEqual([
      'id', 'job_name', 'task_id', 'hostname', 'ip', 'sharding_item', 'execution_source', 'failure_cause', 'is_success', 'start_time', 'complete_time',
    ]);
    expect(of('job_status_trace_log')).toEqual([
      'id', 'job_name', 'original_task_id', 'task_id', 'slave_id', 'execution_type', 'sharding_item', 'state', 'message', 'creation_time',
    ]);
    const type = (table: string, column: string) => columns.find((c) => c.table_name === table && c.column_name === column)?.data_type;
    expect(type('job_execution_log', 'is_success')).toBe('boolean');
    expect(type('job_execution_log', 'start_time')).toBe('timestamp with time zone');
    const indexes = await query<{ indexname: string }>(url, `SELECT indexname FROM pg_indexes WHERE tablename LIKE 'job_%' ORDER BY 1`);
    expect(indexes.map((i) => i.indexname)).toEqual(expect.arrayContaining([
      'job_execution_log_job_complete_idx', 'job_execution_log_job_item_complete_idx', 'job_status_trace_log_task_state_idx',
    ]));
  });

  it('writes every execution to both tables, and reads them back newest first, by item and page', async () => {
    const url = await freshDatabase();
    const writer = tracingWriter(url);
    await writer.start();
    const records = executionSeries(30, { items: 3 });
    records[4] = executionRecord({ ...records[4], status: 'failed', attempts: 2, error: { name: 'Error', message: 'disk full' } });
    records[7] = executionRecord({ ...records[7], status: 'skipped', attempts: 0, durationMs: 0, reason: 'item already running', source: 'MISFIRE' });
    records.forEach((r) => writer.append(r));
    writer.append(executionRecord({ job: 'other' }));
    await writer.close();

    expect(await count(url, 'job_execution_log')).toBe(31);
    expect(await count(url, 'job_status_trace_log')).toBe(31 * 2 - 1);
    const failed = await query<{ failure_cause: string; is_success: boolean; hostname: string }>(
      url, `SELECT failure_cause, is_success, hostname FROM job_execution_log WHERE task_id LIKE $1`, [`billing@-@${records[4].fireTime}@-@%`],
    );
    expect(failed).toEqual([{ failure_cause: 'Error: disk full', is_success: false, hostname: 'worker-7' }]);

    const reader = traceReader(url);
    const newest = await reader.executions('billing', { limit: 10 });
    expect(newest.map((r) => r.fireTime)).toEqual(records.slice(20).reverse().map((r) => r.fireTime));
    const all = await reader.executions('billing', { limit: 100 });
    expect(all.map(({ taskId, hostname, ip, ...record }) => record)).toEqual([...records].reverse());
    expect(all[0]).toMatchObject({ hostname: 'worker-7', ip: '10.0.0.7', taskId: `billing@-@${records[29].fireTime}@-@2@-@10.0.0.7@-@4242` });

    const item2 = await reader.executions('billing', { limit: 3, item: 2 });
    expect(item2.map((r) => [r.item, r.fireTime])).toEqual(records.filter((r) => r.item === 2).slice(-3).reverse().map((r) => [2, r.fireTime]));
    const older = await reader.executions('billing', { limit: 5, before: newest.at(-1)!.finishedAt });
    expect(older.map((r) => r.fireTime)).toEqual(records.slice(15, 20).reverse().map((r) => r.fireTime));
  });

  it('writes a batch with one INSERT per table', async () => {
    const url = await freshDatabase();
    const writer = tracingWriter(url, { batching: { flushIntervalMs: 60_000, batchSize: 1_000 } });
    await writer.start();
    await query(url, 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    await query(url, 'SELECT pg_stat_statements_reset()');
    executionSeries(300, { items: 10 }).forEach((r) => writer.append(r));
    await writer.flush();
    const statements = await query<{ query: string; calls: string; rows: string }>(
      url,
      `SELECT query, calls, rows FROM pg_stat_statements
        WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query ILIKE 'INSERT%'`,
    );
    const insertsInto = (table: string) => statements.filter((s) => s.query.startsWith(`INSERT INTO ${table} `)).map((s) => [Number(s.calls), Number(s.rows)]);
    expect(insertsInto('job_execution_log')).toEqual([[1, 300]]);
    expect(insertsInto('job_status_trace_log')).toEqual([[1, 600]]);
  });

  it('loses nothing while PostgreSQL is stopped, and reports how long and how much it buffered', async () => {
    const url = await freshDatabase();
    const writer = tracingWriter(url, { batching: { flushIntervalMs: 100, retryBaseMs: 100, retryMaxMs: 500 } });
    const events = recordHistoryEvents(writer);
    await writer.start();
    const records = executionSeries(150, { items: 5 });
    records.slice(0, 50).forEach((r) => writer.append(r));
    await writer.flush();

    await server.stop();
    const stoppedAt = Date.now();
    for (let i = 50; i < 150; i += 10) {
      records.slice(i, i + 10).forEach((r) => writer.append(r));
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    expect(writer.stats()).toMatchObject({ buffered: 100, dropped: 0 });
    expect(writer.stats().unavailableSince).not.toBeNull();
    await server.restart();
    const restartedAt = Date.now();
    await waitFor(() => writer.stats().unavailableSince === null && writer.stats().buffered === 0, { timeoutMs: 20_000, message: 'writer recovers' });

    expect(await count(url, 'job_execution_log')).toBe(150);
    expect(events.names()).toEqual(['history:unavailable', 'history:recovered']);
    const [recovered] = events.of('history:recovered');
    expect(recovered).toMatchObject({ store: 'postgres', maxBuffered: 100, dropped: 0 });
    expect(recovered.outageMs).toBeGreaterThanOrEqual(restartedAt - stoppedAt - 200);
    const read = await traceReader(url).executions('billing', { limit: 1_000 });
    expect(read.map((r) => r.fireTime)).toEqual(records.map((r) => r.fireTime).reverse());
  });

  it('counts and reports what a full buffer had to drop, and writes the newest', async () => {
    const url = await freshDatabase();
    const writer = tracingWriter(url, { batching: { maxBuffered: 50, batchSize: 20, flushIntervalMs: 50, retryBaseMs: 100, retryMaxMs: 300 } });
    const events = recordHistoryEvents(writer);
    await writer.start();
    await server.stop();
    const records = executionSeries(80, { from: T0 + 86_400_000 });
    records.slice(0, 10).forEach((r) => writer.append(r));
    await waitFor(() => writer.stats().unavailableSince !== null, { message: 'writer notices the outage' });
    records.slice(10).forEach((r) => writer.append(r));
    await server.restart();
    await waitFor(() => writer.stats().unavailableSince === null && writer.stats().buffered === 0, { timeoutMs: 20_000, message: 'writer recovers' });

    expect(writer.stats()).toMatchObject({ written: 50, dropped: 30, droppedBy: { overflow: 30 } });
    expect(events.droppedCount()).toBe(30);
    expect(events.of('history:recovered')).toEqual([expect.objectContaining({ dropped: 30, maxBuffered: 50 })]);
    const read = await traceReader(url).executions('billing', { limit: 1_000 });
    expect(read.map((r) => r.fireTime)).toEqual(records.slice(30).map((r) => r.fireTime).reverse());
  });

  it('skips and reports a row shardcron did not write', async () => {
    const url = await freshDatabase();
    const writer = tracingWriter(url);
    await writer.start();
    writer.append(executionRecord());
    await writer.close();
    await query(url, `INSERT INTO job_execution_log VALUES ('x', 'billing', 'billing@-@0@-@READY@-@10.0.0.9@-@u', 'h', '10.0.0.9', 0,
      'NORMAL_TRIGGER', NULL, true, now(), now())`);
    const reader = traceReader(url);
    const corrupt: string[] = [];
    reader.on('history:corrupt', (e) => corrupt.push(e.problem));
    expect(await reader.executions('billing')).toEqual([expect.objectContaining(executionRecord())]);
    expect(corrupt).toEqual([expect.stringContaining('task_id')]);
  });
});
