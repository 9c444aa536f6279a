/**
 * The execution history as a node writes it, against real ZooKeeper, Redis and PostgreSQL: with
 * SHARDCRON_TRACING_PG_URL every execution lands in ElasticJob's two tables and in the recent list,
 * and stopping PostgreSQL while jobs run loses no record once it is back; the gap is logged.
 */
import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { Client } from 'pg';
import pino from 'pino';
import { PostgresServer } from '../../src/dev/postgres-server';
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { RecentExecutionsReader } from '../../src/history/recent-executions-reader';
import { defineJob } from '../../src/shared/config/job-definition';
import { createRedisConnection } from '../../src/shared/redis/redis-connection';
import { TestCluster } from '../helpers/cluster';
import { closeServices, startRedis, startZooKeeper, waitFor } from '../helpers/services';

let zk: ZooKeeperServer;
let redisServer: RedisServer;
let postgres: PostgresServer;
let redis: Redis;
let cluster: TestCluster;

beforeAll(async () => {
  [zk, redisServer, postgres] = await Promise.all([startZooKeeper(), startRedis(), PostgresServer.start()]);
  redis = createRedisConnection(redisServer.url);
});
afterAll(async () => {
  redis.disconnect();
  await postgres?.close();
  await closeServices();
});
afterEach(() => cluster.close());

async function query<R extends object>(url: string, text: string): Promise<R[]> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(text)).rows;
  } finally {
    await client.end();
  }
}

/** A logger whose lines the test can read. */
function capturedLogger(): { logger: pino.Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'info' }, sink), lines };
}

describe('history written by a node', () => {
  it('every execution lands in PostgreSQL and the recent list; a PostgreSQL outage loses none of them and is reported', async () => {
    const database = `node_traces_${process.pid}`;
    await query(postgres.url, `CREATE DATABASE ${database}`);
    const url = postgres.url.replace(/\/postgres$/, `/${database}`);
    cluster = new TestCluster(zk, redisServer);
    const job = defineJob({ name: 'traced', cron: '* * * * * ?', shardingTotalCount: 2, execute: (ctx) => (ctx.shardingItem === 1 ? Promise.reject(new Error('item 1 always fails')) : undefined) });
    const { logger, lines } = capturedLogger();
    const node = await cluster.start({ roles: ['scheduler', 'worker'], jobs: [job], instanceId: 'w1', logger, env: { SHARDCRON_TRACING_PG_URL: url } });
    await waitFor(() => node.leader!.isLeader, { message: 'leader elected' });

    // The tables are created on start; rows follow within a flush.
    await waitFor(async () => (await query<{ n: string }>(url, 'SELECT count(*) AS n FROM job_execution_log'))[0].n !== '0', { timeoutMs: 10_000, message: 'first rows' });
    await waitFor(() => cluster.finishes('traced').length >= 4, { message: 'two fires ran' });
    await postgres.stop();
    await sleep(3_500); // about three fires while PostgreSQL is down
    await postgres.restart();
    const restarted = Date.now();
    await waitFor(() => lines.some((l) => l.store === 'postgres' && typeof l.outageMs === 'number'), { timeoutMs: 30_000, message: 'the recovery reported' });
    const recovery = lines.find((l) => l.store === 'postgres' && typeof l.outageMs === 'number')!;
    expect(recovery).toMatchObject({ dropped: 0 });
    expect(recovery.outageMs as number).toBeGreaterThan(1_000);
    expect(lines.some((l) => l.level === 40 && l.store === 'postgres' && /buffering/.test(String(l.msg)))).toBe(true);
    await sleep(1_500);
    await node.close();

    // Every execution the worker finished is in both stores, once.
    const finished = cluster.finishes('traced').filter((f) => f.status === 'completed' || f.status === 'failed');
    expect(finished.length).toBeGreaterThanOrEqual(10);
    const key = (job: string, item: number, fireTime: number) => `${job}|${item}|${fireTime}`;
    const expected = finished.map((f) => key(f.job, f.item, f.fireTime)).sort();
    const rows = await query<{ job_name: string; sharding_item: number; task_id: string; is_success: boolean; failure_cause: string | null }>(url, 'SELECT job_name, sharding_item, task_id, is_success, failure_cause FROM job_execution_log');
    expect(rows.map((r) => key(r.job_name, r.sharding_item, Number(r.task_id.split('@-@')[1]))).sort()).toEqual(expected);
    for (const row of rows) {
      expect(row.is_success).toBe(row.sharding_item === 0);
      if (row.sharding_item === 1) expect(row.failure_cause).toContain('item 1 always fails');
    }
    const states = await query<{ state: string; n: string }>(url, 'SELECT state, count(*) AS n FROM job_status_trace_log GROUP BY state ORDER BY state');
    const byState = Object.fromEntries(states.map((s) => [s.state, Number(s.n)]));
    expect(byState.TASK_RUNNING).toBe(finished.length);
    expect((byState.TASK_FINISHED ?? 0) + (byState.TASK_ERROR ?? 0)).toBe(finished.length);
    const recent = await new RecentExecutionsReader({ redis, namespace: cluster.namespace }).recent('traced', { limit: 1_000 });
    expect(recent.map((r) => key(r.job, r.item, r.fireTime)).sort()).toEqual(expected);
    expect(Date.now() - restarted).toBeLessThan(60_000);
  });
});
