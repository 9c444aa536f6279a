/**
 * Where fire-to-start latency goes, read back from the BullMQ jobs themselves: `timestamp` is set
 * when the producer builds the job (shardcron: the leader, as its enqueue begins), `processedOn`
 * when a worker's moveToActive takes it. Cumulative from the nominal fire time.
 */
import { Queue, type Job } from 'bullmq';
import IORedis from 'ioredis';
import { summarize, type Summary } from './stats';

/**
 * Nominal time of a job: a Job Scheduler's iteration is the job `repeat:{schedulerId}:{nextMillis}`,
 * where nextMillis is the cron slot it was created for (also job.opts.prevMillis, and
 * job.timestamp + job.delay unless the delay was clamped to 0). Plain jobs carry data.fireTime.
 */
export function nominalTime(job: Job): number {
  const id = job.id ?? '';
  if (id.startsWith('repeat:')) return Number(id.slice(id.lastIndexOf(':') + 1));
  const data = job.data as { fireTime?: number };
  return data.fireTime ?? job.timestamp;
}

export interface Stages {
  /** Producer built the job (shardcron only: timer + plan + ZooKeeper ledger done). */
  enqueueBegins?: Summary;
  /** A worker took the job off its queue. */
  pickedUp: Summary;
  /** With `bucketMs`: the same for each bucket of nominal times from the window's start, those with jobs. */
  buckets?: Array<{ from: number; enqueueBegins?: Summary; pickedUp: Summary }>;
}

/** Names of the BullMQ queues under `prefix` whose name starts with `namePrefix`. */
export async function findQueues(redisUrl: string, prefix: string, namePrefix: string): Promise<string[]> {
  const redis = new IORedis(redisUrl, { maxRetriesPerRequest: null });
  try {
    const found = new Set<string>();
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:${namePrefix}*:meta`, 'COUNT', 1000);
      cursor = next;
      for (const key of keys) found.add(key.slice(prefix.length + 1, -':meta'.length));
    } while (cursor !== '0');
    return [...found];
  } finally {
    redis.disconnect();
  }
}

export async function queueStages(
  redisUrl: string,
  queues: readonly string[],
  prefix: string,
  window: { from: number; to: number },
  nominal: (job: Job) => number,
  producerStamps: boolean,
  /** Read at most this many of the newest completed jobs per queue (default: all). */
  limit = 0,
  /** Also summarize each bucket of this many ms of nominal times (0: none). */
  bucketMs = 0,
): Promise<Stages> {
  const connection = new IORedis(redisUrl, { maxRetriesPerRequest: null });
  const enqueue: number[] = [];
  const picked: number[] = [];
  const buckets = new Map<number, { enqueue: number[]; picked: number[] }>();
  try {
    for (const name of queues) {
      const queue = new Queue(name, { connection, prefix });
      const jobs = await queue.getJobs(['completed'], 0, limit > 0 ? limit - 1 : -1);
      for (const job of jobs) {
        const fire = nominal(job);
        if (!(fire >= window.from && fire < window.to) || !job.processedOn) continue;
        enqueue.push(job.timestamp - fire);
        picked.push(job.processedOn - fire);
        if (bucketMs <= 0) continue;
        const from = window.from + Math.floor((fire - window.from) / bucketMs) * bucketMs;
        let bucket = buckets.get(from);
        if (!bucket) buckets.set(from, (bucket = { enqueue: [], picked: [] }));
        bucket.enqueue.push(job.timestamp - fire);
        bucket.picked.push(job.processedOn - fire);
      }
      await queue.close();
    }
  } finally {
    connection.disconnect();
  }
  const summary = (e: number[], p: number[]) => ({ ...(producerStamps ? { enqueueBegins: summarize(e) } : {}), pickedUp: summarize(p) });
  const bucketed = [...buckets].sort(([a], [b]) => a - b).map(([from, b]) => ({ from, ...summary(b.enqueue, b.picked) }));
  return { ...summary(enqueue, picked), ...(bucketMs > 0 && { buckets: bucketed }) };
}
