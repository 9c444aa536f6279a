/**
 * `GET /api/jobs/:name/executions` with SHARDCRON_TRACING_PG_URL, against real ZooKeeper, Redis and
 * PostgreSQL: the recent list in Redis answers first, newest first; when it holds fewer records than
 * asked, the rest come from ElasticJob's traces, all older than the list's oldest; the item filter
 * applies to both; with PostgreSQL stopped the list alone is answered; with Redis stopped, 503s.
 */
import { PostgresServer } from '../../src/dev/postgres-server';
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { PgTracingWriter } from '../../src/history/pg-tracing';
import { createRedisConnection } from '../../src/shared/redis/redis-connection';
import { defineJob } from '../../src/shared/config/job-definition';
import { recentExecutionsKey } from '../../src/shared/registry/redis-keys';
import { TestCluster } from '../helpers/cluster';
import { ConsoleClient } from '../helpers/console-client';
import { executionSeries, T0 } from '../helpers/execution-records';
import { closeServices, expectNoLiveServices, startRedis, startZooKeeper, waitFor } from '../helpers/services';

let zk: ZooKeeperServer;
let redis: RedisServer;
let pg: PostgresServer;
let cluster: TestCluster;
let api: ConsoleClient;

/** 30 executions of `billing`, one a second from T0, items 0..2: the 25 oldest in PostgreSQL, the 5 newest in the recent list. */
const records = executionSeries(30, { items: 3 });

beforeAll(async () => {
  [zk, redis, pg] = await Promise.all([startZooKeeper(), startRedis(), PostgresServer.start()]);
  cluster = new TestCluster(zk, redis);
  const writer = new PgTracingWriter({ connectionString: pg.url, hostname: 'worker-7', ip: '10.0.0.7' });
  await writer.start();
  for (const record of records.slice(0, 25)) writer.append(record);
  await writer.close();
  const connection = createRedisConnection(redis.url);
  // The list's head is the newest, as the workers' LPUSH leaves it.
  await connection.lpush(recentExecutionsKey(cluster.namespace, 'billing'), ...records.slice(25).map((r) => JSON.stringify(r)));
  await connection.quit();
  await cluster.start({ roles: ['worker'], jobs: [defineJob({ name: 'billing', shardingTotalCount: 3, execute: () => undefined })], instanceId: 'w1' });
  const node = await cluster.start({ roles: ['console'], instanceId: 'c1', env: { SHARDCRON_TRACING_PG_URL: pg.url }, ops: { host: '127.0.0.1', port: 0 } });
  api = new ConsoleClient(node.console!.url);
  await waitFor(async () => (await api.get('/api/jobs/billing')).status === 200, { message: 'the job is known' });
});
afterAll(async () => {
  await cluster?.close();
  await pg?.close();
  await closeServices();
  expectNoLiveServices();
});

const fireTimes = (answer: { body: { executions: Array<{ fireTime: number }> } }) => answer.body.executions.map((x) => (x.fireTime - T0) / 1_000);

describe('executions from Redis, then PostgreSQL', () => {
  it('answers the recent list first, then older records from the traces, newest first', async () => {
    const five = await api.get('/api/jobs/billing/executions?limit=5');
    expect(fireTimes(five)).toEqual([29, 28, 27, 26, 25]);
    const twelve = await api.get('/api/jobs/billing/executions?limit=12');
    expect(twelve.status).toBe(200);
    expect(fireTimes(twelve)).toEqual([29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18]);
    // The traces' records are the contract's: their own ids are not answered.
    expect(twelve.body.executions[6]).toEqual(records[23]);
  });

  it('filters both by item', async () => {
    const item1 = await api.get('/api/jobs/billing/executions?limit=4&item=1');
    expect(fireTimes(item1)).toEqual([28, 25, 22, 19]);
    expect(item1.body.executions.every((x: { item: number }) => x.item === 1)).toBe(true);
  });

  it('answers the recent list alone while PostgreSQL is down', async () => {
    await pg.stop();
    try {
      const answer = await api.get('/api/jobs/billing/executions?limit=12');
      expect(answer.status).toBe(200);
      expect(fireTimes(answer)).toEqual([29, 28, 27, 26, 25]);
    } finally {
      await pg.restart();
    }
  });

  it('answers 503 while Redis is down: /readyz names it, executions give up within 5 s', async () => {
    await redis.stop();
    try {
      const ready = await api.get('/readyz');
      expect(ready.status).toBe(503);
      expect(ready.body).toMatchObject({ zookeeper: 'ok', redis: 'down' });
      const started = Date.now();
      const answer = await api.get('/api/jobs/billing/executions?limit=5');
      expect(answer.status).toBe(503);
      expect(answer.body.error.code).toBe('SHARDCRON_UNAVAILABLE');
      expect(Date.now() - started).toBeLessThan(8_000);
    } finally {
      await redis.restart();
    }
    await waitFor(async () => (await api.get('/readyz')).status === 200, { message: 'ready again' });
    // This test Redis keeps nothing across a restart: the list is gone, the traces answer alone.
    expect(fireTimes(await api.get('/api/jobs/billing/executions?limit=5'))).toEqual([24, 23, 22, 21, 20]);
  });
});
