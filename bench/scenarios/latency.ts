/**
 * Scenario 1, fire-to-start latency: handler start minus nominal fire time, for every item of every
 * fire in a window, with jobs firing every second. Peer: BullMQ Job Schedulers (one scheduler per
 * shardcron item, pattern every second) consumed by one BullMQ Worker of the same concurrency.
 */
import { Queue } from 'bullmq';
import IORedis from 'ioredis';
import type { BenchContext } from '../lib/context';
import { measureWindow, sleepUntil, type WindowResult } from '../lib/measure';
import { ProcessGroup, spawnBullmq, spawnShardcron } from '../lib/procs';
import { startServices, type Services } from '../lib/services';
import { findQueues, nominalTime, queueStages, type Stages } from '../lib/stages';
import { QUEUE_PREFIX } from '../../src/shared/registry/queue-names';
import { summarize, waitUntil, type Summary } from '../lib/stats';

export interface LatencyCase {
  name: string;
  jobs: number;
  items: number;
  monitorExecution: boolean;
  /** Also run the BullMQ Job Scheduler peer with jobs x items schedulers. */
  peer: boolean;
  /**
   * Also run raw BullMQ: jobs x items jobs added with one addBulk at each whole second, taken by
   * one worker process of the same concurrency. Nothing decides or locks anything: this is how
   * fast BullMQ itself gets that many jobs from a producer into running handlers on this machine.
   */
  rawPeer?: boolean;
}

export interface LatencyCaseResult extends LatencyCase {
  concurrency: number;
  shardcron: WindowResult & { dispatchLag: Summary; stages: Stages };
  bullmq?: WindowResult & { fields?: Record<string, unknown>; stages: Stages };
  raw?: WindowResult & { stages: Stages };
}

export const CONCURRENCY = 100;

export function latencyCases(): LatencyCase[] {
  return [
    { name: 'burst: 1,000 jobs x 1 item', jobs: 1_000, items: 1, monitorExecution: true, peer: true, rawPeer: true },
    { name: 'burst: 1,000 jobs x 1 item, monitorExecution off', jobs: 1_000, items: 1, monitorExecution: false, peer: false },
    { name: '100 jobs x 10 items', jobs: 100, items: 10, monitorExecution: true, peer: false },
    { name: 'light: 10 jobs x 10 items', jobs: 10, items: 10, monitorExecution: true, peer: true, rawPeer: true },
    { name: 'light: 10 jobs x 10 items, monitorExecution off', jobs: 10, items: 10, monitorExecution: false, peer: false },
  ];
}

async function shardcronCase(ctx: BenchContext, services: Services, c: LatencyCase, seconds: number): Promise<LatencyCaseResult['shardcron']> {
  const group = new ProcessGroup();
  const base = { zk: services.zk.connectionString, redisUrl: services.redis.url, namespace: ctx.unique('lat') };
  const jobs = [{ prefix: 'lat', count: c.jobs, cron: '* * * * * ?', items: c.items, monitorExecution: c.monitorExecution }];
  try {
    const worker = await spawnShardcron(group, { ...base, instanceId: 'worker-1', roles: 'worker', concurrency: CONCURRENCY, jobs }, 180_000);
    const leader = await spawnShardcron(group, { ...base, instanceId: 'leader-1', roles: 'scheduler' }, 180_000);
    await waitUntil(() => leader.events('elected').length > 0, 120_000, 'leader elected');
    const window = await measureWindow([worker], { seconds, perFire: c.jobs * c.items, warmupMs: 3_000, drainMs: 15_000 });
    const lead = await leader.report(window.from, window.to);
    const queues = await findQueues(services.redis.url, QUEUE_PREFIX, `${base.namespace}.`);
    const stages = await queueStages(services.redis.url, queues, QUEUE_PREFIX, window, (job) => (job.data as { fireTime: number }).fireTime, true);
    return { ...window, dispatchLag: summarize(lead.dispatchLag), stages };
  } finally {
    await group.close();
  }
}

async function bullmqCase(ctx: BenchContext, services: Services, schedulers: number, seconds: number): Promise<NonNullable<LatencyCaseResult['bullmq']>> {
  const group = new ProcessGroup();
  const name = ctx.unique('sched');
  const connection = new IORedis(services.redis.url, { maxRetriesPerRequest: null });
  const queue = new Queue(name, { connection });
  try {
    const worker = await spawnBullmq(group, { redisUrl: services.redis.url, queue: name, name: 'bullmq-worker', concurrency: CONCURRENCY });
    for (let i = 0; i < schedulers; i += 1) {
      await queue.upsertJobScheduler(`s${i}`, { pattern: '* * * * * *' }, { name: 'tick', data: { i } });
    }
    const window = await measureWindow([worker], { seconds, perFire: schedulers, warmupMs: 3_000, drainMs: 15_000 });
    const fields = worker.events('fields')[0];
    const stages = await queueStages(services.redis.url, [name], 'bull', window, nominalTime, false);
    return { ...window, fields, stages };
  } finally {
    await group.close();
    await queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close();
    connection.disconnect();
  }
}

async function rawCase(ctx: BenchContext, services: Services, perSecond: number, seconds: number): Promise<NonNullable<LatencyCaseResult['raw']>> {
  const group = new ProcessGroup();
  const name = ctx.unique('raw');
  const connection = new IORedis(services.redis.url, { maxRetriesPerRequest: null });
  const queue = new Queue(name, { connection });
  let producing = true;
  try {
    const worker = await spawnBullmq(group, { redisUrl: services.redis.url, queue: name, name: 'bullmq-raw-worker', concurrency: CONCURRENCY });
    // One addBulk at each whole second, from now until the window (and its warm-up) is over.
    const produce = (async () => {
      for (let at = Math.ceil(Date.now() / 1000) * 1000; producing; at += 1000) {
        await sleepUntil(at);
        if (!producing) break;
        await queue.addBulk(Array.from({ length: perSecond }, (_, i) => ({ name: 'item', data: { fireTime: at, i }, opts: { removeOnComplete: 1000, removeOnFail: 1000 } })));
      }
    })();
    const window = await measureWindow([worker], { seconds, perFire: perSecond, warmupMs: 3_000, drainMs: 15_000, during: async (_from, to) => {
      await sleepUntil(to);
      producing = false;
    } });
    await produce;
    const stages = await queueStages(services.redis.url, [name], 'bull', window, nominalTime, false);
    return { ...window, stages };
  } finally {
    producing = false;
    await group.close();
    await queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close();
    connection.disconnect();
  }
}

export async function runLatency(ctx: BenchContext, cases = latencyCases()): Promise<LatencyCaseResult[]> {
  const seconds = ctx.mode === 'quick' ? 10 : 60;
  const out: LatencyCaseResult[] = [];
  // BENCH_LATENCY_CASES=burst runs only the cases whose name contains one of the comma-separated
  // words; BENCH_LATENCY_PEERS=0 leaves out the BullMQ peers (to compare shardcron builds quickly).
  const only = process.env.BENCH_LATENCY_CASES?.split(',').filter(Boolean);
  const peers = process.env.BENCH_LATENCY_PEERS !== '0';
  for (const c of cases.filter((k) => !only || only.some((word) => k.name.includes(word)))) {
    const services = await startServices(2_000);
    try {
      ctx.log(`latency: ${c.name}, shardcron, ${seconds} s`);
      const shardcron = await shardcronCase(ctx, services, c, seconds);
      let bullmq: LatencyCaseResult['bullmq'];
      if (c.peer && peers) {
        ctx.log(`latency: ${c.name}, BullMQ Job Schedulers (${c.jobs * c.items}), ${seconds} s`);
        bullmq = await bullmqCase(ctx, services, c.jobs * c.items, seconds);
      }
      let raw: LatencyCaseResult['raw'];
      if (c.rawPeer && peers) {
        ctx.log(`latency: ${c.name}, raw BullMQ (addBulk of ${c.jobs * c.items} each second), ${seconds} s`);
        raw = await rawCase(ctx, services, c.jobs * c.items, seconds);
      }
      out.push({ ...c, concurrency: CONCURRENCY, shardcron, bullmq, raw });
      ctx.log(`  shardcron p50/p99/max ${shardcron.latency.p50}/${shardcron.latency.p99}/${shardcron.latency.max} missing ${shardcron.missing}` +
        (bullmq ? `; bullmq ${bullmq.latency.p50}/${bullmq.latency.p99}/${bullmq.latency.max} missing ${bullmq.missing}` : '') +
        (raw ? `; raw bullmq ${raw.latency.p50}/${raw.latency.p99}/${raw.latency.max} missing ${raw.missing}` : ''));
    } finally {
      await services.close();
    }
  }
  return out;
}
