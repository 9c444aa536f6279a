/**
 * Scenario 4, leader failover: kill -9 the leader process while jobs fire every second; time until
 * the standby is elected and until it dispatches its first fire, and count the fires nobody
 * dispatched on time and how they were caught up (MISFIRE runs).
 */
import type { BenchContext } from '../lib/context';
import { sleepUntil } from '../lib/measure';
import { ProcessGroup, spawnShardcron } from '../lib/procs';
import { startServices, type Services } from '../lib/services';
import { round, sleep, waitUntil } from '../lib/stats';

export interface LeaderFailoverRun {
  sessionTimeoutMs: number;
  jobs: number;
  /** Standby's `leader:elected` minus kill time. */
  electedMs: number;
  /** Standby's first `fire:dispatched` minus kill time. */
  firstDispatchMs: number;
  firstDispatchSource: string;
  /** Per job: nominal fire times after the old leader's last dispatch and before the new leader's first on-time fire. */
  firesMissedPerJob: number;
  /** Per job: MISFIRE executions (runs of the whole job, i.e. item starts / items). */
  misfireRunsPerJob: number;
  /** Item starts of the missed fire times themselves (as NORMAL) — expected 0. */
  normalRunsOfMissedFires: number;
}

const JOBS = 10;
const ITEMS = 2;

async function run(ctx: BenchContext, services: Services, sessionTimeoutMs: number): Promise<LeaderFailoverRun> {
  const group = new ProcessGroup();
  const base = { zk: services.zk.connectionString, redisUrl: services.redis.url, namespace: ctx.unique('lf'), sessionTimeoutMs };
  const spec = [{ prefix: 'lf', count: JOBS, items: ITEMS, misfire: true, cron: '* * * * * ?' }];
  try {
    const worker = await spawnShardcron(group, { ...base, instanceId: 'worker-1', roles: 'worker', concurrency: 50, jobs: spec, events: ['start'] });
    const first = await spawnShardcron(group, { ...base, instanceId: 'leader-1', roles: 'scheduler', events: ['fire'] });
    await waitUntil(() => first.events('elected').length > 0, 30_000, 'first leader elected');
    const standby = await spawnShardcron(group, { ...base, instanceId: 'leader-2', roles: 'scheduler', events: ['fire'] });
    await sleep(3_000);
    // Mid-second, after that second's fire was dispatched.
    await sleepUntil(Math.ceil(Date.now() / 1000) * 1000 + 300);
    const killedAt = first.kill('SIGKILL');
    const elected = await waitUntil(() => standby.events('elected')[0], sessionTimeoutMs + 30_000, 'standby elected');
    await waitUntil(() => standby.events('fire').some((m) => m.source === 'NORMAL'), 30_000, 'new leader firing on time');
    await sleep(2_000);
    const oldFires = first.events('fire').map((m) => m.fireTime as number);
    const newFires = standby.events('fire');
    const lastOld = Math.max(...oldFires);
    const firstNormal = Math.min(...newFires.filter((m) => m.source === 'NORMAL').map((m) => m.fireTime as number));
    const missed = (firstNormal - lastOld) / 1000 - 1;
    const execs = worker.events('start');
    const misfireStarts = execs.filter((m) => m.source === 'MISFIRE').length;
    const normalOfMissed = execs.filter((m) => m.source === 'NORMAL' && (m.fireTime as number) > lastOld && (m.fireTime as number) < firstNormal).length;
    const firstDispatch = newFires[0];
    return {
      sessionTimeoutMs,
      jobs: JOBS,
      electedMs: round((elected.at as number) - killedAt),
      firstDispatchMs: round((firstDispatch.at as number) - killedAt),
      firstDispatchSource: String(firstDispatch.source),
      firesMissedPerJob: missed,
      misfireRunsPerJob: round(misfireStarts / (JOBS * ITEMS), 2),
      normalRunsOfMissedFires: normalOfMissed,
    };
  } finally {
    await group.close();
  }
}

export async function runLeaderFailover(ctx: BenchContext): Promise<LeaderFailoverRun[]> {
  const services = await startServices(200);
  try {
    const out: LeaderFailoverRun[] = [];
    for (const timeout of ctx.mode === 'quick' ? [2_000, 4_000] : [2_000, 4_000, 10_000]) {
      ctx.log(`leader failover: kill -9 the leader, session timeout ${timeout} ms`);
      const r = await run(ctx, services, timeout);
      ctx.log(`  elected +${r.electedMs} ms, first dispatch +${r.firstDispatchMs} ms (${r.firstDispatchSource}), missed ${r.firesMissedPerJob}/job, MISFIRE runs ${r.misfireRunsPerJob}/job`);
      out.push(r);
    }
    return out;
  } finally {
    await services.close();
  }
}
