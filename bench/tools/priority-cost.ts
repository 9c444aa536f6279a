/**
 * What BullMQ's prioritized set costs against its wait list, in raw BullMQ and nothing else:
 * `npx tsx bench/tools/priority-cost.ts` (ROUNDS=6, N=20000 by default). Starts a Redis on a free
 * port; each round adds N no-op jobs in addBulk calls of 100 (as the leader's QueuePool does), with
 * a priority or without, alternating, then drains them with one Worker (concurrency 100) and times
 * the add and the drain, with Redis's CPU. shardcron gives requests of jobs firing once a minute or
 * less often a priority (docs/design-notes.md, "Frequent jobs while many fire at once"), and the
 * throughput scenario's jobs are daily crons, so its requests take this path.
 */
import { Queue, Worker } from 'bullmq';
import IORedis from 'ioredis';
import { RedisServer } from '../../src/dev/redis-server';
import { redisInfo } from '../../src/dev/redis-command';

const CHUNK = 100;

async function redisCpuSeconds(port: number): Promise<number> {
  const info = await redisInfo(port, 'cpu');
  return Number(info.get('used_cpu_user')) + Number(info.get('used_cpu_sys'));
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

interface Round {
  addMs: number;
  drainMs: number;
  redisUsPerJob: number;
}

async function round(server: RedisServer, name: string, n: number, priority: number | undefined): Promise<Round> {
  const connection = new IORedis(server.url, { maxRetriesPerRequest: null });
  const queue = new Queue(name, { connection });
  const redisBefore = await redisCpuSeconds(server.port);
  const addStarted = performance.now();
  for (let i = 0; i < n; i += CHUNK) {
    const jobs = Array.from({ length: Math.min(CHUNK, n - i) }, (_, k) => ({
      name: 'noop',
      data: { item: i + k },
      opts: { jobId: `${name}|${i + k}`, removeOnComplete: true, ...(priority !== undefined && { priority }) },
    }));
    await queue.addBulk(jobs);
  }
  const addMs = performance.now() - addStarted;
  let done = 0;
  let finished!: () => void;
  const all = new Promise<void>((resolve) => (finished = resolve));
  const drainStarted = performance.now();
  const workerConnection = new IORedis(server.url, { maxRetriesPerRequest: null });
  const worker = new Worker(name, async () => undefined, { connection: workerConnection, concurrency: 100 });
  worker.on('completed', () => {
    done += 1;
    if (done === n) finished();
  });
  await all;
  const drainMs = performance.now() - drainStarted;
  const redisUsPerJob = ((await redisCpuSeconds(server.port)) - redisBefore) * 1e6 / n;
  await worker.close();
  await queue.obliterate({ force: true });
  await queue.close();
  // BullMQ leaves a connection it was given open.
  workerConnection.disconnect();
  connection.disconnect();
  return { addMs, drainMs, redisUsPerJob };
}

async function main(): Promise<void> {
  const rounds = Number(process.env.ROUNDS ?? 6);
  const n = Number(process.env.N ?? 20_000);
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`ROUNDS must be a positive whole number, got ${process.env.ROUNDS}`);
  if (!Number.isInteger(n) || n < CHUNK) throw new Error(`N must be a whole number of at least ${CHUNK}, got ${process.env.N}`);
  const server = await RedisServer.start();
  const results: Record<'wait list' | 'prioritized (11, a daily job)', Round[]> = { 'wait list': [], 'prioritized (11, a daily job)': [] };
  try {
    // A warm-up pair, not counted.
    await round(server, 'warm-a', n, undefined);
    await round(server, 'warm-b', n, 11);
    for (let r = 0; r < rounds; r += 1) {
      // Alternating which goes first, so a drift of the machine falls on both.
      const order = r % 2 === 0 ? ([undefined, 11] as const) : ([11, undefined] as const);
      for (const priority of order) {
        const key = priority === undefined ? 'wait list' : 'prioritized (11, a daily job)';
        results[key].push(await round(server, `q${r}-${priority ?? 0}`, n, priority));
      }
    }
  } finally {
    await server.close();
  }
  process.stdout.write(`${n} no-op jobs a round, ${rounds} rounds each, medians:\n`);
  process.stdout.write('| path | addBulk, jobs/s | worker drain, jobs/s | Redis CPU per job |\n| --- | --- | --- | --- |\n');
  for (const [path, list] of Object.entries(results)) {
    process.stdout.write(`| ${path} | ${Math.round(n / (median(list.map((x) => x.addMs)) / 1000))} | ${Math.round(n / (median(list.map((x) => x.drainMs)) / 1000))} | ${median(list.map((x) => x.redisUsPerJob)).toFixed(1)} µs |\n`);
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
