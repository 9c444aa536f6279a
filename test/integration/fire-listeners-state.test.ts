/**
 * The fire state of once-per-fire listeners (src/worker/fire-listeners.ts) on a real Redis: several
 * workers, each with its own connection, passing the beforeFire gate and counting items at once;
 * duplicates, a claimer that dies while its beforeFire runs, a stop while waiting, listener errors.
 */
import type { Redis } from 'ioredis';
import type { RedisServer } from '../../src/dev/redis-server';
import { defineJob, type FireContext, type JobListeners } from '../../src/shared/config/job-definition';
import { createLogger } from '../../src/shared/logger';
import { createRedisConnection } from '../../src/shared/redis/redis-connection';
import type { ExecutionRequest } from '../../src/shared/registry/execution-request';
import { fireStateKeys } from '../../src/shared/registry/redis-keys';
import { FireListeners, type FireListenerTimings } from '../../src/worker/fire-listeners';
import { closeServices, startRedis, waitFor } from '../helpers/services';
import { deferred } from '../helpers/deferred';

let redisServer: RedisServer;
const connections: Redis[] = [];
const NS = 'firestate';

beforeAll(async () => {
  redisServer = await startRedis();
});
afterAll(closeServices);
afterEach(async () => {
  await Promise.all(connections.splice(0).map((c) => (c.status === 'end' ? undefined : c.quit().catch(() => c.disconnect()))));
});

/** A worker's FireListeners over a connection of its own. */
function worker(instanceId: string, timings: Partial<FireListenerTimings> = {}, signal = new AbortController().signal): { fires: FireListeners; redis: Redis } {
  const redis = createRedisConnection(redisServer.url);
  connections.push(redis);
  const fires = new FireListeners({ namespace: NS, instanceId, redis: () => redis, abortSignal: () => signal, log: createLogger({ level: 'silent' }), timings });
  return { fires, redis };
}

function job(name: string, listeners: JobListeners) {
  return defineJob({ name, execute: () => undefined, listeners });
}

const request = (job: string, item: number, fireTime: number, fireItems: number): ExecutionRequest => ({ job, item, fireTime, source: 'NORMAL', epoch: 1, fireItems });

describe('once-per-fire listener state in Redis', () => {
  it('9 items on 3 workers: beforeFire once, before any item passes; afterFire once, after the 9th distinct item, duplicates counted once', async () => {
    const log: string[] = [];
    const calls: FireContext[] = [];
    const definition = job('nine', {
      beforeFire: async (fire) => {
        calls.push(fire);
        log.push(`before:${fire.instanceId}`);
        await new Promise((r) => setTimeout(r, 200));
        log.push('before-done');
      },
      afterFire: (fire) => {
        calls.push(fire);
        log.push(`after:${fire.instanceId}`);
      },
    });
    const workers = ['w1', 'w2', 'w3'].map((id) => worker(id).fires);
    const fireTime = 1_000;
    const gates = await Promise.all(
      Array.from({ length: 9 }, (_, item) =>
        workers[item % 3].beforeItem(definition, request('nine', item, fireTime, 9)).then((passed) => {
          log.push(`pass:${item}`);
          return passed;
        }),
      ),
    );
    expect(gates).toEqual(Array(9).fill(true));
    expect(log.filter((l) => l.startsWith('before:'))).toHaveLength(1);
    // Every item passed only once beforeFire returned.
    expect(log.indexOf('before-done')).toBe(1);
    // Eight distinct items end, some twice (a failed-over item ending on two workers).
    for (const item of [0, 1, 2, 3, 3, 4, 5, 6, 7, 0]) await workers[item % 3].itemEnded(definition, request('nine', item, fireTime, 9));
    expect(log.filter((l) => l.startsWith('after:'))).toEqual([]);
    // The last item ends on all three at once: exactly one of them runs afterFire.
    await Promise.all(workers.map((w) => w.itemEnded(definition, request('nine', 8, fireTime, 9))));
    await Promise.all(workers.map((w) => w.itemEnded(definition, request('nine', 2, fireTime, 9))));
    expect(log.filter((l) => l.startsWith('after:'))).toHaveLength(1);
    expect(calls.map((c) => [c.jobName, c.fireTime, c.shardingTotalCount, c.source])).toEqual([
      ['nine', fireTime, 9, 'NORMAL'],
      ['nine', fireTime, 9, 'NORMAL'],
    ]);
    // A late duplicate request of the fire neither waits nor runs beforeFire again.
    expect(await worker('w4').fires.beforeItem(definition, request('nine', 4, fireTime, 9))).toBe(true);
    expect(log.filter((l) => l.startsWith('before:'))).toHaveLength(1);
    // What is left: the claims, expiring; the set of ended items is gone.
    const keys = fireStateKeys(NS, 'nine', fireTime);
    const probe = worker('probe').redis;
    expect(await probe.exists(keys.ended)).toBe(0);
    expect(await probe.hgetall(keys.state)).toEqual({ before: 'done', after: expect.stringMatching(/^w[123]$/), items: '9' });
    const ttl = await probe.pttl(keys.state);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(3_600_000);
  });

  it('fires are apart: each fire of a job gets its own pair of calls', async () => {
    let before = 0;
    let after = 0;
    const definition = job('apart', { beforeFire: () => void (before += 1), afterFire: () => void (after += 1) });
    const { fires } = worker('w1');
    for (const fireTime of [1_000, 2_000, 3_000]) {
      for (const item of [0, 1]) expect(await fires.beforeItem(definition, request('apart', item, fireTime, 2))).toBe(true);
      for (const item of [0, 1]) await fires.itemEnded(definition, request('apart', item, fireTime, 2));
    }
    expect([before, after]).toEqual([3, 3]);
  });

  it('a claimer that dies while beforeFire runs: the others go on once its lease ends, and nobody runs beforeFire again', async () => {
    let started = 0;
    const hang = deferred();
    const definition = job('orphan', {
      beforeFire: async () => {
        started += 1;
        await hang.promise;
      },
    });
    const dying = worker('dying', { leaseMs: 300 });
    const claimed = dying.fires.beforeItem(definition, request('orphan', 0, 1_000, 2));
    await waitFor(() => started === 1, { timeoutMs: 5_000, message: 'beforeFire started on the dying worker' });
    // Its process is gone as far as Redis can tell: no more lease renewals.
    dying.redis.disconnect();
    const waiting = Date.now();
    expect(await worker('survivor', { leaseMs: 300 }).fires.beforeItem(definition, request('orphan', 1, 1_000, 2))).toBe(true);
    expect(Date.now() - waiting).toBeLessThan(3_000);
    expect(started).toBe(1);
    hang.resolve();
    expect(await claimed).toBe(true);
  });

  it('a worker that stops while it waits for beforeFire gives its request back (false)', async () => {
    const hang = deferred();
    let started = false;
    const definition = job('stopping', {
      beforeFire: () => {
        started = true;
        return hang.promise;
      },
    });
    const claimer = worker('claimer').fires;
    const claimed = claimer.beforeItem(definition, request('stopping', 0, 1_000, 2));
    await waitFor(() => started, { timeoutMs: 5_000, message: 'beforeFire started on the claimer' });
    const stop = new AbortController();
    const waiter = worker('waiter', {}, stop.signal).fires.beforeItem(definition, request('stopping', 1, 1_000, 2));
    setTimeout(() => stop.abort(), 100);
    expect(await waiter).toBe(false);
    hang.resolve();
    expect(await claimed).toBe(true);
  });

  it('listener errors are logged, never rethrown: the gate passes and the item count goes on', async () => {
    let afterCalls = 0;
    const definition = job('throwing', {
      beforeFire: () => {
        throw new Error('before boom');
      },
      afterFire: () => {
        afterCalls += 1;
        throw new Error('after boom');
      },
    });
    const { fires } = worker('w1');
    expect(await fires.beforeItem(definition, request('throwing', 0, 1_000, 1))).toBe(true);
    await expect(fires.itemEnded(definition, request('throwing', 0, 1_000, 1))).resolves.toBeUndefined();
    expect(afterCalls).toBe(1);
  });

  it('a worker without afterFire in its code that ends the fire claims it and runs nothing; requests without fireItems cost no command', async () => {
    const { fires, redis } = worker('old-version');
    const bare = job('bare', {});
    await fires.itemEnded(bare, request('bare', 0, 1_000, 1));
    expect(await redis.hget(fireStateKeys(NS, 'bare', 1_000).state, 'after')).toBe('old-version');
    const before = Number((/total_commands_processed:(\d+)/.exec(await redis.info('stats')) ?? [])[1]);
    const { fireItems: _none, ...plain } = request('bare', 0, 2_000, 1);
    await fires.itemEnded(bare, plain);
    expect(await fires.beforeItem(bare, plain)).toBe(true);
    const after = Number((/total_commands_processed:(\d+)/.exec(await redis.info('stats')) ?? [])[1]);
    // Only the first INFO itself was processed in between.
    expect(after - before).toBe(1);
  });
});
