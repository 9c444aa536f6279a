import * as fs from 'node:fs';
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { createRedisConnection } from '../../src/shared/redis/redis-connection';
import { ProcessCluster, type ExecLine } from '../helpers/process-cluster';
import { closeServices, startRedis, startZooKeeper, waitFor } from '../helpers/services';

const SESSION_MS = 2_000;
let zk: ZooKeeperServer;
let redis: RedisServer;
let cluster: ProcessCluster;
/** The item lock of the processes started by the tests running now (see the `describe.each` below). */
let lockEnv: Record<string, string> = {};

beforeAll(async () => {
  [zk, redis] = await Promise.all([startZooKeeper(), startRedis()]);
});
afterAll(closeServices);
beforeEach(() => {
  cluster = new ProcessCluster({ zk: zk.connectionString, redisUrl: redis.url, sessionTimeoutMs: SESSION_MS, env: lockEnv });
});
afterEach(async () => {
  await cluster.close();
});

const doubleCompletions = (job: string) => cluster.doubleCompletions(job);

// Worker faults with either item lock: the lease kept across fires (a new namespace's default) must
// keep what the per-run lock keeps.
describe.each([
  ['the per-run lock', { SHARDCRON_ITEM_LEASE: 'off' }],
  ['item leases', { SHARDCRON_ITEM_LEASE: 'on' }],
])('with %s', (_lock, env: Record<string, string>) => {
  beforeAll(() => {
    lockEnv = env;
  });
  afterAll(() => {
    lockEnv = {};
  });

  describe('worker loss', () => {
    it('kill -9 a worker mid-fire: its unfinished items restart on survivors within session timeout + 1 s', async () => {
      const job = { name: 'fo', cron: '0/4 * * * * ?', shardingTotalCount: 6, failover: true, sleepMs: 3_000 };
      await Promise.all(['w1', 'w2', 'w3'].map((w) => cluster.start(w, 'worker', [job])));
      await cluster.start('leader', 'scheduler', []);
      const fire = await waitFor(
        () => {
          const byFire = new Map<number, ExecLine[]>();
          for (const s of cluster.starts('fo')) byFire.set(s.fireTime, [...(byFire.get(s.fireTime) ?? []), s]);
          return [...byFire].find(([, list]) => list.length === 6)?.[0];
        },
        { timeoutMs: 20_000, message: 'a fire with all 6 items running' },
      );
      const victims = cluster.starts('fo').filter((s) => s.fireTime === fire && s.instanceId === 'w2');
      expect(victims.length).toBe(2);
      cluster.signal('w2', 'SIGKILL');
      const killedAt = Date.now();

      const moved = await waitFor(
        () => {
          const restarts = cluster.starts('fo').filter((s) => s.fireTime === fire && s.source === 'FAILOVER');
          return restarts.length >= victims.length ? restarts : undefined;
        },
        { timeoutMs: 10_000, message: 'failover starts of every item of the killed worker' },
      );
      expect(moved.map((m) => m.item).sort()).toEqual(victims.map((v) => v.item).sort());
      // SHARDCRON_TEST_FIGURES=file: keep the measured restart delays (the issue notes quote them).
      if (process.env.SHARDCRON_TEST_FIGURES) {
        const figure = { scenario: 'worker kill -9', sessionTimeoutMs: SESSION_MS, restartDelaysMs: moved.map((m) => m.at - killedAt) };
        fs.appendFileSync(process.env.SHARDCRON_TEST_FIGURES, `${JSON.stringify(figure)}\n`);
      }
      for (const m of moved) {
        expect(m.instanceId).not.toBe('w2');
        expect(m.at - killedAt).toBeLessThanOrEqual(SESSION_MS + 1_000);
      }
      await waitFor(() => cluster.execs('fo').filter((l) => l.event === 'finish' && l.source === 'FAILOVER' && l.status === 'completed').length >= 2, {
        timeoutMs: 10_000,
        message: 'failover runs completed',
      });
      expect(cluster.overlaps('fo')).toEqual([]);
      expect(doubleCompletions('fo')).toEqual([]);
      // Every item of the fire completed exactly once somewhere.
      const completed = cluster.execs('fo').filter((l) => l.event === 'finish' && l.status === 'completed' && l.fireTime === fire);
      expect(completed.map((c) => c.item).sort()).toEqual([0, 1, 2, 3, 4, 5]);
    });
  });

  describe('worker pause', () => {
    it('SIGSTOP past the session timeout, then SIGCONT: it aborts its executions and nothing completes twice', async () => {
      const job = { name: 'paused', cron: '0/4 * * * * ?', shardingTotalCount: 4, failover: true, sleepMs: 3_000 };
      await Promise.all(['w1', 'w2'].map((w) => cluster.start(w, 'worker', [job])));
      await cluster.start('leader', 'scheduler', []);
      const fire = await waitFor(
        () => {
          const starts = cluster.starts('paused');
          const fires = [...new Set(starts.map((s) => s.fireTime))];
          return fires.find((f) => starts.filter((s) => s.fireTime === f).length === 4);
        },
        { timeoutMs: 20_000, message: 'a fire with all 4 items running' },
      );
      cluster.signal('w2', 'SIGSTOP');
      await waitFor(() => cluster.starts('paused').filter((s) => s.fireTime === fire && s.source === 'FAILOVER').length === 2, {
        timeoutMs: SESSION_MS + 5_000,
        message: 'the paused worker items failed over',
      });
      cluster.signal('w2', 'SIGCONT');
      // The resumed worker reports how its old executions ended.
      const ends = await waitFor(
        () => {
          const finishes = cluster.execs('paused').filter((l) => l.event === 'finish' && l.instanceId === 'w2' && l.fireTime === fire);
          return finishes.length === 2 ? finishes : undefined;
        },
        { timeoutMs: 10_000, message: 'the resumed worker reports its old executions' },
      );
      expect(ends.map((e) => e.status)).toEqual(['aborted', 'aborted']);
      await waitFor(() => cluster.execs('paused').filter((l) => l.event === 'finish' && l.fireTime === fire && l.status === 'completed').length === 4, {
        timeoutMs: 10_000,
        message: 'every item of the fire completed once',
      });
      expect(doubleCompletions('paused')).toEqual([]);
    });
  });
});

describe('leader loss', () => {
  it('kill -9 the leader in the middle of a dispatch burst: every item of that fire runs exactly once', async () => {
    const jobs = Array.from({ length: 100 }, (_, i) => ({ name: `burst-${i}`, cron: '0/2 * * * * ?', shardingTotalCount: 2 }));
    await Promise.all(['w1', 'w2'].map((w) => cluster.start(w, 'worker', jobs)));
    await cluster.start('s1', 'scheduler', []);
    await cluster.start('s2', 'scheduler', []);
    await waitFor(
      () => {
        const counts = new Map<number, number>();
        for (const st of cluster.starts()) counts.set(st.fireTime, (counts.get(st.fireTime) ?? 0) + 1);
        return [...counts.values()].some((n) => n === 200);
      },
      { timeoutMs: 30_000, message: 'a complete fire of all 100 jobs' },
    );
    // Kill s1 a few milliseconds after a nominal fire time, while it writes and enqueues that fire.
    const boundary = Math.ceil((Date.now() + 500) / 2_000) * 2_000;
    await new Promise((resolve) => setTimeout(resolve, boundary + 8 - Date.now()));
    cluster.signal('s1', 'SIGKILL');
    await waitFor(() => cluster.lines.some((l) => l.kind === 'leader' && l.node === 's2'), { timeoutMs: 10_000, message: 's2 elected' });
    await waitFor(() => cluster.starts().filter((s) => s.fireTime === boundary).length >= 200, {
      timeoutMs: 15_000,
      message: 'all 200 items of the interrupted fire',
    }).catch((err) => {
      const fires = cluster.lines.filter((l) => l.kind === 'fire').map((l) => `${l.node}:${l.fireTime}:${l.source}`);
      const counts: Record<string, number> = {};
      for (const st of cluster.starts()) counts[`${st.fireTime}:${st.source}`] = (counts[`${st.fireTime}:${st.source}`] ?? 0) + 1;
      throw new Error(`${(err as Error).message}; boundary ${boundary}; fires ${[...new Set(fires)].slice(-12).join(' ')}; starts ${JSON.stringify(counts)}`);
    });
    await waitFor(() => cluster.lines.some((l) => l.kind === 'fire' && l.node === 's2' && (l.fireTime as number) > boundary), {
      timeoutMs: 10_000,
      message: 's2 fires on schedule',
    });
    const ofFire = cluster.starts().filter((s) => s.fireTime === boundary);
    const keys = ofFire.map((s) => `${s.job}|${s.item}`);
    expect(new Set(keys).size).toBe(200);
    expect(keys.length).toBe(200);
    const all = cluster.starts().map((s) => `${s.job}|${s.fireTime}|${s.item}`);
    expect(all.length).toBe(new Set(all).size);
  });

  it.each([
    [true, 'each job fires once on takeover'],
    [false, 'no catch-up fire'],
  ])('leader down across several fires with misfire %s: %s', async (misfire) => {
    const job = { name: misfire ? 'catch-up' : 'no-catch-up', cron: '* * * * * ?', shardingTotalCount: 2, misfire };
    await cluster.start('w1', 'worker', [job]);
    await cluster.start('s1', 'scheduler', []);
    await waitFor(() => cluster.starts(job.name).length >= 4, { timeoutMs: 10_000, message: 'fires before the kill' });
    cluster.signal('s1', 'SIGKILL');
    const killedAt = Date.now();
    // Several fires pass with no leader at all (s1's session expires, nobody else is running). The
    // first of them must be older than the grace in which a leaderless fire still runs as itself
    // (two session timeouts, planDueFires) when s2 plans it, however fast s2 starts: at one session
    // timeout plus 2.5 s, a fast start left it within the grace, run as NORMAL, and no MISFIRE (CI).
    const startAt = killedAt + 2 * SESSION_MS + 2_500;
    await waitFor(() => Date.now() > startAt, { timeoutMs: 10_000 });
    // The last fire s1 dispatched, read now: it enqueues a fire up to 300 ms ahead, so one due just
    // after the kill may have started after it.
    const lastBefore = Math.max(...cluster.starts(job.name).map((s) => s.fireTime));
    await cluster.start('s2', 'scheduler', []);
    await waitFor(() => cluster.starts(job.name).some((s) => s.source === 'NORMAL' && s.fireTime > startAt), {
      timeoutMs: 15_000,
      message: 'normal fires after the takeover',
    });
    const catchUp = cluster.starts(job.name).filter((s) => s.source === 'MISFIRE');
    if (misfire) {
      expect(catchUp.map((s) => s.item).sort()).toEqual([0, 1]);
      expect(catchUp[0].fireTime).toBe(lastBefore + 1_000);
    } else {
      expect(catchUp).toEqual([]);
    }
    const keys = cluster.starts(job.name).map((s) => `${s.fireTime}|${s.item}`);
    expect(keys.length).toBe(new Set(keys).size);
  });
});

describe('infrastructure restarts', () => {
  it('ZooKeeper restarted within the session timeout: nothing lost or duplicated; a Redis restart is survived', async () => {
    // A long session: the workers stop executing (and their runs count as aborted) once out of
    // contact for two thirds of it, which a slow ZooKeeper restart on a loaded machine came near.
    const long = new ProcessCluster({ zk: zk.connectionString, redisUrl: redis.url, sessionTimeoutMs: 9_000 });
    cluster = long;
    const job = { name: 'steady', cron: '* * * * * ?', shardingTotalCount: 3, sleepMs: 100 };
    // A connect timeout shorter than the outage: a request waiting for the connection gives up
    // while the session still lives, which must not make a completed run count as not recorded.
    const shortWait = { SHARDCRON_ZK_CONNECT_TIMEOUT_MS: '1000' };
    await Promise.all(['w1', 'w2'].map((w) => long.start(w, 'worker', [job], shortWait)));
    await long.start('leader', 'scheduler', []);
    await waitFor(() => long.starts('steady').length >= 9, { timeoutMs: 15_000, message: 'steady fires' });

    const stoppedAt = Date.now();
    await zk.stop();
    // Down for longer than the workers' connect timeout (and with fires due meanwhile).
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await zk.restart();
    const restartedAt = Date.now();
    await waitFor(() => long.starts('steady').some((s) => s.fireTime > restartedAt + 2_000 && s.source === 'NORMAL'), {
      timeoutMs: 15_000,
      message: 'fires after the ZooKeeper restart',
    });
    const keys = long.starts('steady').map((s) => `${s.fireTime}|${s.item}`);
    // On failure, the whole story of every fire with an item started twice.
    const doubled = [...new Set(keys.filter((k, i) => keys.indexOf(k) !== i).map((k) => Number(k.split('|')[0])))];
    expect(doubled.map((f) => ({ fire: f, story: long.story('steady', f) }))).toEqual([]);
    const fires = [...new Set(long.starts('steady').map((s) => s.fireTime))].sort((a, b) => a - b);
    // The leader is back when the first fire after the restart starts (a MISFIRE run for the fires it
    // missed, or a NORMAL one). Reconnecting can take a few seconds on a loaded machine.
    const backAt = Math.min(...long.starts('steady').filter((s) => s.at > restartedAt && s.source !== 'FAILOVER').map((s) => s.at));
    for (let f = fires[0]; f <= fires[fires.length - 1]; f += 1_000) {
      const ran = long.starts('steady').filter((s) => s.fireTime === f).length;
      // Fires due while the leader was cut off are coalesced into one MISFIRE run (misfire on);
      // every fire before the cut and after the leader is back runs all its items.
      if (f < stoppedAt - 1_000 || f > Math.max(restartedAt + 3_000, backAt)) expect({ fire: f, ran, backAt: backAt - restartedAt }).toEqual({ fire: f, ran: 3, backAt: backAt - restartedAt });
    }
    expect(long.execs('steady').filter((l) => l.status === 'aborted')).toEqual([]);

    await redis.stop();
    await redis.restart();
    const redisBack = Date.now();
    const startsAfter = () => long.starts('steady').filter((s) => s.fireTime > redisBack + 1_000);
    const bothRun = () => new Set(startsAfter().map((s) => s.instanceId)).size === 2 && startsAfter().length >= 6;
    await waitFor(bothRun, { timeoutMs: 20_000 }).catch(() => undefined);
    if (!bothRun()) {
      // On failure, what each node did after the restart (it failed once in CI, under load).
      const relative = (at: unknown) => (typeof at === 'number' ? at - redisBack : at);
      const after = long.lines.filter((l) => typeof l.at === 'number' && l.at > redisBack);
      const fires = long.lines.filter((l) => l.kind === 'fire' && typeof l.fireTime === 'number' && l.fireTime > redisBack);
      expect({
        startsByWorker: Object.fromEntries(['w1', 'w2'].map((w) => [w, startsAfter().filter((s) => s.instanceId === w).length])),
        firesDispatched: fires.map((l) => ({ fire: relative(l.fireTime), source: l.source, items: l.items })),
        notCompleted: after.filter((l) => l.kind === 'exec' && l.event === 'finish' && l.status !== 'completed').map((l) => ({ ...l, at: relative(l.at) })),
        otherEvents: after.filter((l) => l.kind !== 'exec').map((l) => ({ ...l, at: relative(l.at) })),
      }).toEqual('both workers running items within 20 s of the Redis restart');
    }
  });

  it('Redis refusing writes for a few seconds under the same leader: every fire of that time runs, as itself or in a MISFIRE run', async () => {
    // Found in review: a fire whose ledger was written and whose enqueue Redis refused was logged
    // and lost while the same process kept leading (only a next leader replays ledgers).
    const job = { name: 'refused', cron: '* * * * * ?', shardingTotalCount: 3 };
    await Promise.all(['w1', 'w2'].map((w) => cluster.start(w, 'worker', [job])));
    await cluster.start('leader', 'scheduler', []);
    await waitFor(() => cluster.starts('refused').length >= 6, { timeoutMs: 15_000, message: 'fires before the outage' });
    const admin = createRedisConnection(redis.url);
    let refusedFrom = 0;
    let refusedUntil = 0;
    try {
      // Every write needs memory Redis no longer gives (maxmemory below what it holds, noeviction).
      await admin.config('SET', 'maxmemory-policy', 'noeviction');
      await admin.config('SET', 'maxmemory', '1');
      refusedFrom = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 2_500));
    } finally {
      await admin.config('SET', 'maxmemory', '0');
      refusedUntil = Date.now();
      admin.disconnect();
    }
    await waitFor(() => cluster.starts('refused').some((s) => s.fireTime > refusedUntil + 2_000), { timeoutMs: 20_000, message: 'fires after the outage' });
    const starts = cluster.starts('refused');
    const misfireRuns = starts.filter((s) => s.source === 'MISFIRE').map((s) => s.fireTime);
    const unrun: number[] = [];
    for (let f = Math.ceil(refusedFrom / 1_000) * 1_000; f <= refusedUntil; f += 1_000) {
      const items = new Set(starts.filter((s) => s.fireTime === f).map((s) => s.item));
      // A fire run late beyond the catch-up's bound is folded into the MISFIRE run of a later fire.
      if (items.size < 3 && !misfireRuns.some((m) => m >= f)) unrun.push(f);
    }
    expect(unrun.map((f) => ({ fire: f - refusedFrom, story: cluster.story('refused', f) }))).toEqual([]);
  });

  it('rolling restart of every worker under load: no item missed, none doubled', async () => {
    const job = { name: 'rolling', cron: '* * * * * ?', shardingTotalCount: 6, sleepMs: 300 };
    await Promise.all(['a1', 'b1', 'c1'].map((w) => cluster.start(w, 'worker', [job])));
    await cluster.start('leader', 'scheduler', []);
    await waitFor(() => cluster.starts('rolling').length >= 12, { timeoutMs: 15_000, message: 'load running' });
    const from = Date.now();
    for (const [old, replacement] of [['a1', 'a2'], ['b1', 'b2'], ['c1', 'c2']]) {
      cluster.signal(old, 'SIGTERM');
      expect(await cluster.exited(old)).toBe(0);
      await cluster.start(replacement, 'worker', [job]);
    }
    const to = Date.now();
    await waitFor(() => cluster.starts('rolling').some((s) => s.fireTime > to + 2_000), { timeoutMs: 10_000, message: 'fires after the restarts' });
    const completed = () => cluster.execs('rolling').filter((l) => l.event === 'finish' && l.status === 'completed');
    const fires: number[] = [];
    for (let f = Math.ceil(from / 1_000) * 1_000; f <= to; f += 1_000) fires.push(f);
    const itemsOf = (f: number) => [...new Set(completed().filter((c) => c.fireTime === f).map((c) => c.item))].sort();
    // A request moved late (put back by a draining worker, deferred behind a lock) completes a
    // little after its fire; missed means never, so wait a while before judging.
    await waitFor(() => fires.every((f) => itemsOf(f).length === 6), { timeoutMs: 10_000, message: 'every item of the fires during the restarts completed' }).catch(() => undefined);
    for (const f of fires) {
      const items = itemsOf(f);
      // On failure, what happened to that fire: its dispatch, runs, moves and misses.
      const story = items.length === 6 ? [] : cluster.story('rolling', f);
      expect({ fire: f, items, story }).toEqual({ fire: f, items: [0, 1, 2, 3, 4, 5], story: [] });
    }
    const keys = completed().map((c) => `${c.fireTime}|${c.item}`);
    expect(keys.length).toBe(new Set(keys).size);
    expect(cluster.overlaps('rolling')).toEqual([]);
  });
});
