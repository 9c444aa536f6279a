/**
 * How often a plain BullMQ worker stops taking jobs after a Sentinel failover that loses writes:
 * `ITERS=40 npx tsx bench/tools/sentinel-stall.ts`. No shardcron node runs: one BullMQ `Worker`
 * (concurrency 2) and one `Queue` on clients made by `createRedisClient`, the options every
 * shardcron process uses with Sentinels. Each round adds a job every 200 ms, cuts replication
 * (the replica gets a wrong `masterauth`), kills the primary with SIGKILL 1.5 s later, restores the
 * replica's auth, waits for the promotion, and checks 12 s later which of the jobs added from
 * 0.5 s to 11 s after the promotion have run. A round where some have not prints the worker's
 * state and every client's connection events from the kill on (`conn`: the worker's connection,
 * `block`: its blocking connection, `prod`: the queue's). Every await on a client is bounded, so
 * a client that never comes back shows as TIMEOUT instead of hanging the tool.
 *
 * Why: redis-sentinel.test.ts once saw one worker of three run nothing for the 3.5 s after a
 * promotion while the others did (docs/deployment.md, "What a failover loses"); this tool, without
 * shardcron, saw a round where no job added after the promotion ran within 12 s.
 */
import { Queue, Worker } from 'bullmq';
import { redisCommand } from '../../src/dev/redis-command';
import { RedisSentinelGroup } from '../../src/dev/redis-sentinel';
import { createRedisClient, type RedisClient } from '../../src/shared/redis/redis-connection';
import type { RedisTarget } from '../../src/shared/redis/redis-target';
import { sleep } from '../lib/stats';

const ITERS = Number(process.env.ITERS ?? 20);
const ADD_EVERY_MS = 200;
const CHECK_AFTER_MS = 12_000;

/** `p`, or 'TIMEOUT' once `ms` passed. */
const within = <T>(p: Promise<T>, ms: number): Promise<T | 'TIMEOUT'> => Promise.race([p, sleep(ms).then(() => 'TIMEOUT' as const)]);

/** Collects a client's connection events, timed from `origin()`. */
function watch(events: string[], origin: () => number, name: string, client: { status: string; on(event: string, listener: () => void): unknown }): void {
  for (const event of ['connect', 'ready', 'close', 'reconnecting', 'end']) client.on(event, () => events.push(`${Date.now() - origin()} ms ${name} ${event} (${client.status})`));
  client.on('error', () => undefined);
}

interface Round {
  round: number;
  promotionMs: number;
  jobsAfterPromotion: number;
  notRun: number;
  notAdded: number;
  status: { conn: string; prod: string; block: string };
}

async function round(group: RedisSentinelGroup, target: RedisTarget, n: number): Promise<Round> {
  await Promise.all(group.servers.filter((s) => !s.running).map((s) => s.restart()));
  await group.waitUntilHealthy(30_000);
  let origin = Date.now();
  const events: string[] = [];
  const conn: RedisClient = createRedisClient(target);
  const prod: RedisClient = createRedisClient(target);
  watch(events, () => origin, 'conn', conn);
  watch(events, () => origin, 'prod', prod);
  const name = `stall-${n}`;
  const queue = new Queue(name, { connection: prod });
  queue.on('error', () => undefined);
  const ran = new Set<number>();
  const worker = new Worker(name, async (job) => void ran.add(job.data.t as number), { connection: conn, concurrency: 2 });
  worker.on('error', (err) => events.push(`${Date.now() - origin} ms worker error: ${err.message.slice(0, 100)}`));
  await worker.waitUntilReady();
  // BullMQ's own duplicate of `conn` for BZPOPMIN: not public, read for the diagnosis only.
  const internals = worker as unknown as { backend?: { blockingConnection?: { _client?: RedisClient } }; blockUntil?: number; drained?: boolean; waiting?: unknown };
  const block = internals.backend?.blockingConnection?._client;
  if (block) watch(events, () => origin, 'block', block);

  let adding = true;
  const added: number[] = [];
  const accepted = new Set<number>();
  const producer = (async () => {
    while (adding) {
      const t = Date.now();
      added.push(t);
      queue.add('j', { t }, { removeOnComplete: true }).then(() => accepted.add(t), () => undefined);
      await sleep(ADD_EVERY_MS);
    }
  })();
  await sleep(3_000);
  const primary = (await group.primary())!;
  const replica = group.servers.find((s) => s !== primary)!;
  await redisCommand(replica.port, ['CONFIG', 'SET', 'masterauth', 'not-the-password']);
  await redisCommand(primary.port, ['CLIENT', 'KILL', 'TYPE', 'replica']);
  await sleep(1_500);
  await primary.kill();
  origin = Date.now();
  events.push('0 ms primary killed');
  await redisCommand(replica.port, ['CONFIG', 'SET', 'masterauth', '']);
  await group.waitForPromotion(primary, 30_000);
  const promotedAt = Date.now();
  events.push(`${promotedAt - origin} ms promoted`);
  await sleep(CHECK_AFTER_MS);
  adding = false;
  await producer;

  const after = added.filter((t) => t > promotedAt + 500 && t < promotedAt + 11_000);
  const result: Round = {
    round: n,
    promotionMs: promotedAt - origin,
    jobsAfterPromotion: after.length,
    notRun: after.filter((t) => !ran.has(t)).length,
    notAdded: after.filter((t) => !accepted.has(t)).length,
    status: { conn: conn.status, prod: prod.status, block: block?.status ?? 'unknown' },
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
  if (result.notRun > 0) {
    process.stdout.write(`  worker: running ${worker.isRunning()}, blockUntil ${internals.blockUntil}, drained ${internals.drained}, waiting ${internals.waiting !== undefined && internals.waiting !== null}\n`);
    process.stdout.write(`  counts: ${JSON.stringify(await within(queue.getJobCounts('wait', 'prioritized', 'delayed', 'active'), 2_000))}\n`);
    for (const line of events) process.stdout.write(`  ${line}\n`);
  }
  const closed = await within(Promise.all([worker.close(true), queue.close()]), 5_000);
  if (closed === 'TIMEOUT') process.stdout.write('  closing the worker and the queue timed out\n');
  conn.disconnect();
  prod.disconnect();
  return result;
}

async function main(): Promise<void> {
  const group = await RedisSentinelGroup.start();
  const target: RedisTarget = { url: `redis://${group.name}`, sentinel: { sentinels: group.sentinelAddresses, name: group.name } };
  const rounds: Round[] = [];
  try {
    for (let n = 0; n < ITERS; n++) rounds.push(await round(group, target, n));
  } finally {
    await group.close();
  }
  const stalled = rounds.filter((r) => r.notRun > 0);
  process.stdout.write(`${stalled.length} of ${rounds.length} rounds had jobs added after the promotion that had not run ${CHECK_AFTER_MS / 1000} s after it${stalled.length ? `: rounds ${stalled.map((r) => r.round).join(', ')}` : ''}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
