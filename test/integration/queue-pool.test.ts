/**
 * QueuePool against a real Redis: nothing stays of a request once it ran, so Redis memory follows
 * the work in flight, not throughput; an add of a request still waiting is ignored, one of a request
 * that ran reaches the worker again, which skips it (item-executor.test.ts, "without monitorExecution").
 */
import { Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { RedisServer } from '../../src/dev/redis-server';
import { priorityForPeriod, QueuePool } from '../../src/leader/queue-pool';
import type { ExecutionRequest } from '../../src/shared/registry/execution-request';
import { QUEUE_PREFIX } from '../../src/shared/registry/queue-names';
import { createRedisConnection } from '../../src/shared/redis/redis-connection';
import { closeServices, eventually, startRedis } from '../helpers/services';

let redisServer: RedisServer;
let redis: Redis;
let pool: QueuePool;

beforeAll(async () => {
  redisServer = await startRedis();
});

afterAll(async () => {
  await closeServices();
});

beforeEach(async () => {
  redis = createRedisConnection(redisServer.url);
  await redis.flushdb();
  pool = new QueuePool(redis);
});

afterEach(async () => {
  await pool.close();
  redis.disconnect();
});

const QUEUE = 'q-memory';
const request = (item: number, fireTime = 1_764_000_000_000): ExecutionRequest => ({ job: 'billing', item, fireTime, source: 'NORMAL', epoch: 1 });

/** Runs every request of QUEUE with a no-op handler until `count` ran; resolves with the job ids run. */
async function runAll(count: number): Promise<string[]> {
  const ran: string[] = [];
  const connection = createRedisConnection(redisServer.url);
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const worker = new Worker(
    QUEUE,
    async (job: Job) => {
      ran.push(job.id!);
    },
    { connection, prefix: QUEUE_PREFIX, concurrency: 50 },
  );
  worker.on('completed', () => {
    if (ran.length >= count) done();
  });
  await finished;
  await worker.close();
  connection.disconnect();
  return ran;
}

test('completed requests are removed as they complete: nothing of them stays in Redis', async () => {
  const total = 300;
  const requests = Array.from({ length: total }, (_, i) => request(i));
  const before = await redis.dbsize();
  await pool.enqueue(new Map([[QUEUE, requests]]));
  expect(await runAll(total)).toHaveLength(total);
  const queue = pool.get(QUEUE);
  expect(await queue.getJobCounts('completed', 'wait', 'active')).toEqual({ completed: 0, wait: 0, active: 0 });
  const left = await redis.keys(`${QUEUE_PREFIX}:${QUEUE}:*`);
  // The queue's own bookkeeping (id counter, events stream, meta...), none of it per request.
  expect(left.filter((k) => k.includes('|'))).toEqual([]);
  expect(left.length).toBeLessThan(10);
  expect(before).toBe(0);
});

test('an add of a request that waits is ignored; one of a request that ran is a new job (the worker skips it)', async () => {
  const waiting = request(0);
  await pool.enqueue(new Map([[QUEUE, [waiting]]]));
  await pool.enqueue(new Map([[QUEUE, [waiting, { ...waiting, catchUp: true }]]]));
  const queue = pool.get(QUEUE);
  expect(await queue.getJobCounts('wait')).toEqual({ wait: 1 });
  await runAll(1);
  await pool.enqueue(new Map([[QUEUE, [waiting]]]));
  expect(await queue.getJobCounts('wait')).toEqual({ wait: 1 });
});

test('with completedKept (SHARDCRON_COMPLETED_KEPT) the newest completed requests of each queue stay, for Bull Board', async () => {
  const keeping = new QueuePool(redis, QUEUE_PREFIX, 50);
  try {
    await keeping.enqueue(new Map([[QUEUE, Array.from({ length: 120 }, (_, i) => request(i))]]));
    await runAll(120);
    expect(await keeping.get(QUEUE).getJobCounts('completed')).toEqual({ completed: 50 });
  } finally {
    await keeping.close();
  }
});

test("enqueueGathered: the callers of one event-loop turn share addBulk calls, and a caller whose requests fail gets its own error while the others' land", async () => {
  const queue = pool.get(QUEUE);
  const addBulk = jest.spyOn(queue, 'addBulk');
  try {
    // 300 callers of one request each, as a takeover's replays of 300 one-item jobs.
    await Promise.all(Array.from({ length: 300 }, (_, i) => pool.enqueueGathered(new Map([[QUEUE, [request(i)]]]))));
    expect(await queue.getJobCounts('wait')).toEqual({ wait: 300 });
    expect(addBulk).toHaveBeenCalledTimes(3);

    addBulk.mockClear();
    // Data that cannot be serialized fails its addBulk: the shared call fails, each caller goes again alone.
    const unserializable = { ...request(1_000), extra: BigInt(1) } as unknown as ExecutionRequest;
    const outcomes = await Promise.allSettled([
      pool.enqueueGathered(new Map([[QUEUE, [request(500)]]])),
      pool.enqueueGathered(new Map([[QUEUE, [unserializable]]])),
      pool.enqueueGathered(new Map([['q-other', [request(501)]]])),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(String((outcomes[1] as PromiseRejectedResult).reason)).toMatch(/BigInt/);
    expect(await queue.getJobCounts('wait')).toEqual({ wait: 301 });
    expect(await pool.get('q-other').getJobCounts('wait')).toEqual({ wait: 1 });
  } finally {
    addBulk.mockRestore();
  }
});

test('rate-monotonic priorities: requests of rarer jobs wait in the prioritized set, and a consumer takes every request of a more frequent job first', async () => {
  // 'hourly' fires every hour, 'minutely' every minute, 'billing' every second (no priority).
  const periods: Record<string, number> = { hourly: 3_600_000, minutely: 60_000, billing: 1_000 };
  const ranked = new QueuePool(redis, QUEUE_PREFIX, 0, (r) => priorityForPeriod(periods[r.job]));
  try {
    const of = (job: string, item: number): ExecutionRequest => ({ ...request(item), job });
    // Enqueued rarest first: without priorities the consumer would take them in this order.
    await ranked.enqueue(new Map([[QUEUE, [of('hourly', 0), of('hourly', 1), of('minutely', 0), of('minutely', 1), of('billing', 0), of('billing', 1)]]]));
    const queue = ranked.get(QUEUE);
    expect(await queue.getJobCounts('wait', 'prioritized')).toEqual({ wait: 2, prioritized: 4 });
    // Every reader of pending requests (failover's moves, the admin's removal) asks for 'prioritized' too.
    expect((await queue.getJobs(['wait', 'delayed', 'prioritized'])).length).toBe(6);
    const order: string[] = [];
    const connection = createRedisConnection(redisServer.url);
    const worker = new Worker(QUEUE, async (job: Job) => void order.push(job.name), { connection, prefix: QUEUE_PREFIX, concurrency: 1 });
    await eventually(() => expect(order).toHaveLength(6));
    await worker.close();
    connection.disconnect();
    expect(order).toEqual(['billing', 'billing', 'minutely', 'minutely', 'hourly', 'hourly']);
  } finally {
    await ranked.close();
  }
});

test('priorityForPeriod: none below a minute or without a period, then one more per doubling of the period', () => {
  expect([undefined, 1_000, 59_999, 60_000, 119_999, 120_000, 3_600_000, 86_400_000, Infinity].map(priorityForPeriod)).toEqual([
    undefined, undefined, undefined, 1, 1, 2, 6, 11, undefined,
  ]);
});
