/**
 * The recent list's own cost, in a process that does nothing else: `npx tsx bench/tools/recent-list-cost.ts`
 * (ROUNDS=30 by default). Starts a Redis on a free port, appends 100 jobs x 200 records per round to a
 * RecentExecutionsWriter in job order (as a worker finishes a fire's items) and flushes; prints the
 * median CPU per record of this process (record building included) and of Redis. docs/history.md
 * quotes it beside the history-cost scenario, which measures the list inside busy workers.
 */
import IORedis from 'ioredis';
import { RedisServer } from '../../src/dev/redis-server';
import { redisInfo } from '../../src/dev/redis-command';
import { RecentExecutionsWriter } from '../../src/history/recent-executions';

const JOBS = 100;
const ITEMS = 200;

async function redisCpuSeconds(port: number): Promise<number> {
  const info = await redisInfo(port, 'cpu');
  return Number(info.get('used_cpu_user')) + Number(info.get('used_cpu_sys'));
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main(): Promise<void> {
  const rounds = Number(process.env.ROUNDS ?? 30);
  const server = await RedisServer.start();
  const redis = new IORedis(server.url, { maxRetriesPerRequest: null });
  const writer = new RecentExecutionsWriter({ redis, namespace: 'bench' });
  const processUs: number[] = [];
  const redisUs: number[] = [];
  try {
    const base = Date.now();
    for (let r = 0; r <= rounds; r += 1) {
      const cpu = process.cpuUsage();
      const redisBefore = await redisCpuSeconds(server.port);
      for (let j = 0; j < JOBS; j += 1) {
        for (let item = 0; item < ITEMS; item += 1) {
          const startedAt = base + r * 1000;
          writer.append({ job: `tp${j}`, item, fireTime: base + r * 1000, source: 'NORMAL', instanceId: '127.0.0.1@-@12345', status: 'completed', attempts: 1, startedAt, finishedAt: startedAt + 1, durationMs: 1 });
        }
        // Let the writer's timer and replies in between, as a worker's event loop would.
        if (j % 10 === 9) await new Promise((resolve) => setImmediate(resolve));
      }
      await writer.flush();
      const used = process.cpuUsage(cpu);
      const redisSeconds = (await redisCpuSeconds(server.port)) - redisBefore;
      // Round 0 warms the JIT and fills the lists to their length; not counted.
      if (r === 0) continue;
      processUs.push((used.user + used.system) / (JOBS * ITEMS));
      redisUs.push((redisSeconds * 1e6) / (JOBS * ITEMS));
    }
    process.stdout.write(`median of ${rounds} rounds of ${JOBS * ITEMS} records: ${median(processUs).toFixed(2)} µs per record in this process, ${median(redisUs).toFixed(2)} µs in Redis\n`);
  } finally {
    await writer.close();
    redis.disconnect();
    await server.stop();
  }
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
