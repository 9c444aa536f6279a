/**
 * The recent list against a real Redis: the newest N per job, newest first, filtered by item,
 * corrupt entries skipped; one round trip, one script call, per flush; a Redis outage costs nothing within
 * the buffer and counted drops beyond it.
 */
import type { Redis } from 'ioredis';
import type { RedisServer } from '../../src/dev/redis-server';
import { RecentExecutionsReader } from '../../src/history/recent-executions-reader';
import { RecentExecutionsWriter, type RecentExecutionsWriterOptions } from '../../src/history/recent-executions';
import { createRedisConnection } from '../../src/shared/redis/redis-connection';
import { recentExecutionsKey } from '../../src/shared/registry/redis-keys';
import { executionRecord, executionSeries, T0 } from '../helpers/execution-records';
import { recordHistoryEvents } from '../helpers/history-events';
import { startRoundTripRelay, type RoundTripRelay } from '../helpers/round-trip-relay';
import { closeServices, eventually, expectNoLiveServices, startRedis, waitFor } from '../helpers/services';
import { uniqueNamespace } from '../helpers/zk';

let server: RedisServer;
const connections: Redis[] = [];
const writers: RecentExecutionsWriter[] = [];

beforeAll(async () => {
  server = await startRedis();
});
afterEach(async () => {
  await Promise.all(writers.splice(0).map((w) => w.close()));
  connections.splice(0).forEach((c) => c.disconnect());
});
afterAll(async () => {
  await closeServices();
  expectNoLiveServices();
});

async function connect(port = server.port): Promise<Redis> {
  const redis = createRedisConnection(`redis://127.0.0.1:${port}`);
  connections.push(redis);
  await waitFor(() => redis.status === 'ready', { message: 'redis connection ready' });
  return redis;
}

function writer(redis: Redis, options: Partial<RecentExecutionsWriterOptions> = {}): RecentExecutionsWriter {
  const w = new RecentExecutionsWriter({ redis, namespace: options.namespace ?? uniqueNamespace('recent'), ...options });
  writers.push(w);
  return w;
}

describe('recent list (real Redis)', () => {
  it('keeps the newest N per job and answers newest first, filtered by item', async () => {
    const redis = await connect();
    const namespace = uniqueNamespace('recent');
    const w = writer(redis, { namespace, keepPerJob: 50 });
    const records = executionSeries(120, { items: 3 });
    records.forEach((r) => w.append(r));
    w.append(executionRecord({ job: 'other', item: 9 }));
    await w.flush();

    expect(await redis.llen(recentExecutionsKey(namespace, 'billing'))).toBe(50);
    const reader = new RecentExecutionsReader({ redis, namespace });
    const newest = await reader.recent('billing', { limit: 1_000 });
    expect(newest.map((r) => r.fireTime)).toEqual(records.slice(70).reverse().map((r) => r.fireTime));
    expect(newest[0]).toEqual(records[119]);

    const item1 = await reader.recent('billing', { limit: 5, item: 1 });
    expect(item1.map((r) => [r.item, r.fireTime])).toEqual(
      records.filter((r) => r.item === 1).slice(-5).reverse().map((r) => [1, r.fireTime]),
    );
    expect(await reader.recent('other', { limit: 10 })).toEqual([executionRecord({ job: 'other', item: 9 })]);
    expect(await reader.recent('never-ran')).toEqual([]);
    expect(w.stats()).toMatchObject({ written: 121, dropped: 0, buffered: 0 });
  });

  it('writes a flush of more records for one job than one push takes, in order', async () => {
    const redis = await connect();
    const namespace = uniqueNamespace('recent');
    const w = writer(redis, { namespace, keepPerJob: 10_000, batching: { batchSize: 2_500, maxBuffered: 10_000, flushIntervalMs: 60_000 } });
    const records = executionSeries(2_500);
    records.forEach((r) => w.append(r));
    await w.flush();
    expect(w.stats()).toMatchObject({ written: 2_500, dropped: 0 });
    // Newest first across the pushes of 1,000: the whole list in the reverse of the appends.
    const key = recentExecutionsKey(namespace, 'billing');
    expect((await redis.lrange(key, 0, -1)).map((entry) => JSON.parse(entry)[2])).toEqual(records.map((r) => r.fireTime).reverse());
    // Kept fewer than one flush brings: the newest only.
    const smallNamespace = uniqueNamespace('recent');
    const small = writer(redis, { namespace: smallNamespace, keepPerJob: 7, batching: { batchSize: 2_500, maxBuffered: 10_000, flushIntervalMs: 60_000 } });
    records.forEach((r) => small.append(r));
    await small.flush();
    const newest = await new RecentExecutionsReader({ redis, namespace: smallNamespace }).recent('billing', { limit: 100 });
    expect(newest.map((r) => r.fireTime)).toEqual(records.slice(-7).reverse().map((r) => r.fireTime));
  });

  it('writes a flush of more records than one script call takes in several, every list whole', async () => {
    const redis = await connect();
    const namespace = uniqueNamespace('recent');
    const w = writer(redis, { namespace, batching: { batchSize: 2_500, maxBuffered: 10_000, flushIntervalMs: 60_000 } });
    // 1,250 jobs of two records each: 2,500 records, three calls of at most 1,000.
    const jobs = Array.from({ length: 1_250 }, (_, i) => `j${i}`);
    for (const job of jobs) executionSeries(2, { job }).forEach((r) => w.append(r));
    await w.flush();
    expect(w.stats()).toMatchObject({ written: 2_500, dropped: 0, buffered: 0 });
    const lengths = await Promise.all(jobs.map((job) => redis.llen(recentExecutionsKey(namespace, job))));
    expect(new Set(lengths)).toEqual(new Set([2]));
  });

  it('writes on after Redis forgot its scripts (SCRIPT FLUSH, a restart)', async () => {
    const redis = await connect();
    const namespace = uniqueNamespace('recent');
    const w = writer(redis, { namespace, batching: { flushIntervalMs: 60_000 } });
    executionSeries(2).forEach((r) => w.append(r));
    await w.flush();
    await redis.script('FLUSH');
    executionSeries(3, { job: 'other' }).forEach((r) => w.append(r));
    await w.flush();
    expect(w.stats()).toMatchObject({ written: 5, dropped: 0, buffered: 0 });
    expect(await redis.llen(recentExecutionsKey(namespace, 'other'))).toBe(3);
  });

  it('skips and reports corrupt entries, and still fills the limit', async () => {
    const redis = await connect();
    const namespace = uniqueNamespace('recent');
    const key = recentExecutionsKey(namespace, 'billing');
    const records = executionSeries(6);
    await redis.lpush(key, ...records.slice(0, 3).map((r) => JSON.stringify(r)));
    await redis.lpush(key, '{not json', JSON.stringify({ ...records[0], item: 'x' }), JSON.stringify(executionRecord({ job: 'other' })));
    await redis.lpush(key, ...records.slice(3).map((r) => JSON.stringify(r)));

    const reader = new RecentExecutionsReader({ redis, namespace });
    const corrupt: string[] = [];
    reader.on('history:corrupt', (e) => corrupt.push(e.problem));
    const answer = await reader.recent('billing', { limit: 5 });
    expect(answer.map((r) => r.fireTime)).toEqual(records.slice(1).reverse().map((r) => r.fireTime));
    expect(reader.corruptSkipped).toBe(3);
    expect(corrupt).toEqual([
      expect.stringContaining('"other"'),
      expect.stringContaining('item'),
      expect.stringContaining('not JSON'),
    ]);
  });

  it('drops and counts the records of a job whose key Redis refuses for good, and writes the others', async () => {
    const redis = await connect();
    const namespace = uniqueNamespace('recent');
    await redis.set(recentExecutionsKey(namespace, 'clash'), 'a string, not a list');
    const w = writer(redis, { namespace });
    executionSeries(3, { job: 'clash' }).forEach((r) => w.append(r));
    executionSeries(2).forEach((r) => w.append(r));
    await w.flush();
    expect(w.stats()).toMatchObject({ written: 2, dropped: 3, droppedBy: { rejected: 3 }, buffered: 0 });
    expect(await new RecentExecutionsReader({ redis, namespace }).recent('billing')).toHaveLength(2);
  });

  it('writes one flush in one round trip, one script call: LPUSH, LTRIM and PEXPIRE once per job touched', async () => {
    let relay: RoundTripRelay | undefined;
    try {
      relay = await startRoundTripRelay(server.port);
      const redis = await connect(relay.port);
      const stats = await connect();
      const namespace = uniqueNamespace('recent');
      const w = writer(redis, { namespace, ttlMs: 60_000, batching: { flushIntervalMs: 60_000 } });
      // The relay's yardstick: two commands that wait for each other are two round trips.
      const control = relay.roundTrips();
      await redis.ping();
      await redis.ping();
      expect(relay.roundTrips() - control).toBe(2);

      // The first flush sends the script itself (EVAL) on the connection; later ones call it by its digest.
      executionSeries(1, { job: 'warm-up' }).forEach((r) => w.append(r));
      await w.flush();
      await stats.config('RESETSTAT');
      const before = relay.roundTrips();
      for (const job of ['a', 'b', 'c']) executionSeries(10, { job }).forEach((r) => w.append(r));
      await w.flush();

      expect(relay.roundTrips() - before).toBe(1);
      const calls = commandCalls(await stats.info('commandstats'));
      // RESETSTAT cleared the counters, its own call included: nothing else reached the server
      // (the script's own commands are counted too).
      expect(calls).toEqual({ evalsha: 1, lpush: 3, ltrim: 3, pexpire: 3 });
      for (const job of ['a', 'b', 'c']) {
        expect(await stats.llen(recentExecutionsKey(namespace, job))).toBe(10);
        expect(await stats.pttl(recentExecutionsKey(namespace, job))).toBeGreaterThan(50_000);
      }
    } finally {
      await relay?.close();
    }
  });

  it('loses nothing while Redis is down within the buffer bound, then counts what it had to drop', async () => {
    const redis = await connect();
    const namespace = uniqueNamespace('recent');
    const w = writer(redis, { namespace, batching: { maxBuffered: 100, batchSize: 20, flushIntervalMs: 50, retryMaxMs: 500 } });
    const events = recordHistoryEvents(w);
    const reader = new RecentExecutionsReader({ redis, namespace });

    // Within the bound: 60 records while Redis is down for about two seconds.
    await server.stop();
    const first = executionSeries(60, { items: 4 });
    first.forEach((r) => w.append(r));
    await waitFor(() => w.stats().unavailableSince !== null, { message: 'writer notices the outage' });
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    await server.restart();
    // Recovery is declared on the first batch that lands; the rest of the buffer follows it.
    await waitFor(() => w.stats().unavailableSince === null && w.stats().buffered === 0, { timeoutMs: 15_000, message: 'writer recovers and drains' });
    // The server was restarted without persistence: the list holds exactly what was buffered.
    expect((await reader.recent('billing', { limit: 1_000 })).map((r) => r.fireTime)).toEqual(first.map((r) => r.fireTime).reverse());
    expect(w.stats()).toMatchObject({ written: 60, dropped: 0, buffered: 0 });
    expect(events.names()).toEqual(['history:unavailable', 'history:recovered']);
    expect(events.of('history:recovered')).toEqual([expect.objectContaining({ maxBuffered: 60, dropped: 0 })]);

    // Beyond the bound: 150 records, room for 100; the 50 oldest go and are counted.
    events.clear();
    await server.stop();
    const second = executionSeries(150, { from: T0 + 3_600_000 });
    second.slice(0, 10).forEach((r) => w.append(r));
    await waitFor(() => w.stats().unavailableSince !== null, { message: 'writer notices the second outage' });
    second.slice(10).forEach((r) => w.append(r));
    await server.restart();
    await waitFor(() => w.stats().unavailableSince === null && w.stats().buffered === 0, { timeoutMs: 15_000, message: 'writer recovers and drains again' });
    await eventually(async () => {
      expect((await reader.recent('billing', { limit: 1_000 })).map((r) => r.fireTime)).toEqual(second.slice(50).map((r) => r.fireTime).reverse());
    });
    expect(w.stats()).toMatchObject({ written: 160, dropped: 50, droppedBy: { overflow: 50 } });
    expect(events.droppedCount()).toBe(50);
    expect(events.of('history:recovered')).toEqual([expect.objectContaining({ dropped: 50, maxBuffered: 100 })]);
  });
});

/** `{ command: calls }` from INFO commandstats, without the INFO that asked. */
function commandCalls(info: string): Record<string, number> {
  const calls: Record<string, number> = {};
  for (const match of info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) {
    if (match[1] !== 'info') calls[match[1]] = Number(match[2]);
  }
  return calls;
}
