/**
 * Scenario 7, Redis memory at a steady load: 1 scheduler and 2 workers, 200 jobs x 2 items every
 * second (400 items/s, history on), for BENCH_MEMORY_MINUTES (full: 15, quick: 3). Samples Redis's
 * memory every 30 s and tells, at the end, what the jobs' recent lists and the completed requests
 * kept take of it. With BENCH_BASELINE_CODE the other build runs the same load afterwards, on a
 * fresh Redis, for a before/after in one run.
 */
import Redis from 'ioredis';
import type { BenchContext } from '../lib/context';
import { ProcessGroup, spawnShardcron, type BenchProcess } from '../lib/procs';
import { startServices } from '../lib/services';
import { round, sleep, waitUntil } from '../lib/stats';

export interface RedisMemorySample {
  /** Seconds since the first fire. */
  atS: number;
  usedMb: number;
  rssMb: number;
  keys: number;
  /** Item runs finished by both workers so far. */
  finished: number;
}

export interface RedisMemoryRun {
  /** `this build`, or the baseline's dist/ path. */
  code: string;
  minutes: number;
  jobs: number;
  itemsPerJob: number;
  /** Items finished per second over the run (400 expected). */
  itemsPerSecond: number;
  samples: RedisMemorySample[];
  end: {
    usedMb: number;
    rssMb: number;
    /** MEMORY USAGE of every recent list (`*:executions:*`), summed. */
    recentListsMb: number;
    recentRecords: number;
    /** Completed requests kept in the queues. */
    completedKept: number;
  };
}

const JOBS = 200;
const ITEMS = 2;
const SAMPLE_EVERY_MS = 30_000;

const mb = (bytes: number): number => round(bytes / 1024 / 1024, 1);

async function memory(redis: Redis): Promise<{ used: number; rss: number; keys: number }> {
  const info = await redis.info('memory');
  const field = (name: string) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(info)?.[1] ?? 0);
  return { used: field('used_memory'), rss: field('used_memory_rss'), keys: await redis.dbsize() };
}

/** Keys matching `pattern`, and the bytes MEMORY USAGE gives them. */
async function usage(redis: Redis, pattern: string): Promise<{ keys: string[]; bytes: number }> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  let bytes = 0;
  for (let i = 0; i < keys.length; i += 500) {
    const pipeline = redis.pipeline();
    for (const key of keys.slice(i, i + 500)) pipeline.memory('USAGE', key, 'SAMPLES', '0');
    for (const [, n] of (await pipeline.exec()) ?? []) bytes += Number(n ?? 0);
  }
  return { keys, bytes };
}

/** Item runs the workers finished for fire times in [from, to). */
async function finishedBy(workers: readonly BenchProcess[], from: number, to: number): Promise<number> {
  const reports = await Promise.all(workers.map((w) => w.report(from, to)));
  return reports.reduce((n, r) => n + r.finished, 0);
}

async function run(ctx: BenchContext, minutes: number, code?: string): Promise<RedisMemoryRun> {
  const services = await startServices(200);
  const group = new ProcessGroup();
  const redis = new Redis(services.redis.port, '127.0.0.1');
  try {
    const base = { zk: services.zk.connectionString, redisUrl: services.redis.url, namespace: ctx.unique('mem'), ...(code && { code }) };
    const spec = [{ prefix: 'mem', count: JOBS, items: ITEMS, cron: '* * * * * ?' }];
    const workers = await Promise.all([1, 2].map((i) => spawnShardcron(group, { ...base, instanceId: `worker-${i}`, roles: 'worker', concurrency: 50, jobs: spec }, 120_000)));
    const leader = await spawnShardcron(group, { ...base, instanceId: 'leader-1', roles: 'scheduler', events: ['fire'] });
    await waitUntil(() => leader.events('fire').length > 0, 60_000, 'first fire');
    const started = Date.now();
    const samples: RedisMemorySample[] = [];
    let counted = started - 5_000;
    let finished = 0;
    const sample = async () => {
      const m = await memory(redis);
      // Fire times up to a second ago: their items have run (no-op handlers).
      const upTo = Date.now() - 1_000;
      finished += await finishedBy(workers, counted, upTo);
      counted = upTo;
      samples.push({ atS: round((Date.now() - started) / 1000), usedMb: mb(m.used), rssMb: mb(m.rss), keys: m.keys, finished });
      const last = samples[samples.length - 1];
      ctx.log(`  +${last.atS} s: Redis used ${last.usedMb} MB, RSS ${last.rssMb} MB, ${last.keys} keys, ${last.finished} items run`);
    };
    await sample();
    for (let at = SAMPLE_EVERY_MS; at <= minutes * 60_000; at += SAMPLE_EVERY_MS) {
      await sleep(started + at - Date.now());
      await sample();
    }
    const last = samples[samples.length - 1];
    const recent = await usage(redis, '*:executions:*');
    let recentRecords = 0;
    for (const key of recent.keys) recentRecords += await redis.llen(key);
    const completed = await usage(redis, '*:completed');
    let completedKept = 0;
    for (const key of completed.keys) completedKept += await redis.zcard(key);
    return {
      code: code ?? 'this build',
      minutes,
      jobs: JOBS,
      itemsPerJob: ITEMS,
      itemsPerSecond: round(last.finished / Math.max(last.atS - 1, 1)),
      samples,
      end: {
        usedMb: last.usedMb,
        rssMb: last.rssMb,
        recentListsMb: mb(recent.bytes),
        recentRecords,
        completedKept,
      },
    };
  } finally {
    redis.disconnect();
    await group.close();
    await services.close();
  }
}

export async function runRedisMemory(ctx: BenchContext): Promise<RedisMemoryRun[]> {
  const minutes = Number(process.env.BENCH_MEMORY_MINUTES ?? (ctx.mode === 'quick' ? 3 : 15));
  const out: RedisMemoryRun[] = [];
  const baseline = process.env.BENCH_BASELINE_CODE;
  for (const code of [undefined, ...(baseline ? [baseline] : [])]) {
    ctx.log(`redis memory: ${JOBS} jobs x ${ITEMS} items every second for ${minutes} min (${code ?? 'this build'})`);
    const r = await run(ctx, minutes, code);
    ctx.log(`  end: used ${r.end.usedMb} MB, RSS ${r.end.rssMb} MB; recent lists ${r.end.recentListsMb} MB (${r.end.recentRecords} records), completed kept ${r.end.completedKept}`);
    out.push(r);
  }
  return out;
}
