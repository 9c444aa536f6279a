/**
 * Once-per-fire listeners with real processes (issue 20): 3 worker processes and a scheduler, 9
 * items per fire. Each listener prints a line when it begins (test/fixtures/node-process.ts); the
 * tests count them per fire and order them against the items' execution lines.
 */
import * as fs from 'node:fs';
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { ProcessCluster, type ExecLine, type JobSpec } from '../helpers/process-cluster';
import { closeServices, startRedis, startZooKeeper, waitFor } from '../helpers/services';

const SESSION_MS = 2_000;
const ITEMS = 9;
let zk: ZooKeeperServer;
let redis: RedisServer;
let cluster: ProcessCluster;

beforeAll(async () => {
  [zk, redis] = await Promise.all([startZooKeeper(), startRedis()]);
});
afterAll(closeServices);
beforeEach(() => {
  cluster = new ProcessCluster({ zk: zk.connectionString, redisUrl: redis.url, sessionTimeoutMs: SESSION_MS });
});
afterEach(async () => {
  await cluster.close();
});

async function startCluster(job: JobSpec, ...others: JobSpec[]): Promise<void> {
  await Promise.all(['w1', 'w2', 'w3'].map((w) => cluster.start(w, 'worker', [job, ...others])));
  await cluster.start('leader', 'scheduler', []);
}

/** Fires of `job` whose afterFire ran, oldest first. */
function endedFires(job: string): number[] {
  return [...new Set(cluster.listenerCalls(job).filter((l) => l.event === 'afterFire').map((l) => l.fireTime))].sort((a, b) => a - b);
}

/** The fire's own execution lines (its MISFIRE re-runs are left out: they stand for later fires). */
function execsOf(job: string, fireTime: number): ExecLine[] {
  return cluster.execs(job).filter((l) => l.fireTime === fireTime);
}

/**
 * What every fire with listeners must show: one beforeFire and one afterFire, beforeFire begun
 * before any of its items started, afterFire begun after every item's last line.
 */
function expectOncePerFire(job: string, fireTime: number): void {
  const calls = cluster.listenerCalls(job).filter((l) => l.fireTime === fireTime);
  const story = () => cluster.story(job, fireTime).join('\n');
  const before = calls.filter((l) => l.event === 'beforeFire');
  const after = calls.filter((l) => l.event === 'afterFire');
  expect({ fireTime, before: before.length, after: after.length }).toEqual({ fireTime, before: 1, after: 1 });
  expect(after[0].items).toBe(ITEMS);
  const execs = execsOf(job, fireTime);
  const firstStart = Math.min(...execs.filter((l) => l.event === 'start').map((l) => l.at));
  const lastEnd = Math.max(...execs.filter((l) => l.event === 'finish').map((l) => l.at));
  if (!(before[0].at <= firstStart && after[0].at >= lastEnd)) throw new Error(`listener order broken for fire ${fireTime}:\n${story()}`);
}

describe('beforeFire and afterFire run exactly once per fire', () => {
  it('3 workers, 9 items, several fires; an item that fails and one skipped (running, misfire off) still let afterFire run', async () => {
    // Item 7 runs past the period: the next fire finds it running and skips it (misfire off).
    const job: JobSpec = { name: 'nine', cron: '0/2 * * * * ?', shardingTotalCount: ITEMS, misfire: false, sleepMs: 300, itemSleepMs: { 7: 2_500 }, failItems: [4], fireListeners: true };
    // The same job without listeners, for the figures: what the wait for beforeFire adds to a fire's starts.
    await startCluster(job, { name: 'plain', cron: '0/2 * * * * ?', shardingTotalCount: ITEMS, sleepMs: 300 });
    await waitFor(() => endedFires('nine').length >= 5, { timeoutMs: 30_000, message: '5 fires of nine with afterFire' });
    // Anything late (a second call) would come within a moment.
    await new Promise((r) => setTimeout(r, 1_000));
    const fires = endedFires('nine');
    const dispatched = cluster.lines.filter((l) => l.kind === 'fire' && l.job === 'nine').map((l) => l.fireTime as number);
    // Every dispatched fire up to the last ended one ended (none was left without afterFire).
    expect(dispatched.filter((f) => f <= fires[fires.length - 1])).toEqual(fires);
    for (const fireTime of fires) expectOncePerFire('nine', fireTime);
    // The runs behind it: item 4 failed in every fire; item 7 was skipped in some.
    const finishes = cluster.execs('nine').filter((l) => l.event === 'finish' && fires.includes(l.fireTime));
    expect(new Set(finishes.filter((l) => l.item === 4).map((l) => l.status))).toEqual(new Set(['failed']));
    expect(finishes.some((l) => l.item === 7 && l.status === 'skipped')).toBe(true);
    // The calls were spread: not one instance for everything (each claim is won by whoever comes first).
    expect(new Set(cluster.listenerCalls('nine').map((l) => l.instanceId)).size).toBeGreaterThan(1);
    // SHARDCRON_TEST_FIGURES=file: the last item's start after the fire time, with and without listeners.
    if (process.env.SHARDCRON_TEST_FIGURES) {
      const lastStart = (name: string, fireTime: number) => Math.max(...execsOf(name, fireTime).filter((l) => l.event === 'start' && l.source === 'NORMAL').map((l) => l.at)) - fireTime;
      const figure = { scenario: 'fire listeners: last start after the fire time (ms)', withListeners: fires.map((f) => lastStart('nine', f)), without: fires.map((f) => lastStart('plain', f)) };
      fs.appendFileSync(process.env.SHARDCRON_TEST_FIGURES, `${JSON.stringify(figure)}\n`);
    }
  });

  it('kill -9 of a worker mid-fire: its items fail over, and the fire\'s listeners still run once each, afterFire after the moved items', async () => {
    const job: JobSpec = { name: 'killed', cron: '0/4 * * * * ?', shardingTotalCount: ITEMS, failover: true, sleepMs: 2_500, fireListeners: true };
    await startCluster(job);
    const fire = await waitFor(
      () => {
        const starts = cluster.starts('killed');
        return [...new Set(starts.map((s) => s.fireTime))].find((f) => starts.filter((s) => s.fireTime === f).length === ITEMS);
      },
      { timeoutMs: 20_000, message: 'a fire with all 9 items running' },
    );
    const victims = cluster.starts('killed').filter((s) => s.fireTime === fire && s.instanceId === 'w2');
    expect(victims.length).toBe(3);
    cluster.signal('w2', 'SIGKILL');
    await waitFor(() => endedFires('killed').includes(fire), { timeoutMs: 20_000, message: `afterFire of the fire ${fire} the kill cut` });
    // And of the next fire, run by the two survivors.
    await waitFor(() => endedFires('killed').some((f) => f > fire), { timeoutMs: 20_000, message: 'afterFire of a fire after the kill' });
    await new Promise((r) => setTimeout(r, 1_000));
    const moved = cluster.starts('killed').filter((s) => s.fireTime === fire && s.source === 'FAILOVER');
    expect(moved.map((m) => m.item).sort()).toEqual(victims.map((v) => v.item).sort());
    for (const fireTime of endedFires('killed')) expectOncePerFire('killed', fireTime);
    // The fire the kill cut: afterFire ran on a survivor, after the failed-over runs completed.
    const after = cluster.listenerCalls('killed').find((l) => l.event === 'afterFire' && l.fireTime === fire)!;
    expect(after.instanceId).not.toBe('w2');
    const movedEnds = cluster.execs('killed').filter((l) => l.event === 'finish' && l.fireTime === fire && l.source === 'FAILOVER');
    expect(movedEnds.map((l) => l.status)).toEqual(['completed', 'completed', 'completed']);
    for (const end of movedEnds) expect(after.at).toBeGreaterThanOrEqual(end.at);
    expect(cluster.doubleCompletions('killed')).toEqual([]);
  });

  it('kill -9 mid-fire with failover off: the lost items are given up, and afterFire of that fire still runs once', async () => {
    const job: JobSpec = { name: 'givenup', cron: '0/4 * * * * ?', shardingTotalCount: ITEMS, failover: false, sleepMs: 2_500, fireListeners: true };
    await startCluster(job);
    const fire = await waitFor(
      () => {
        const starts = cluster.starts('givenup');
        return [...new Set(starts.map((s) => s.fireTime))].find((f) => starts.filter((s) => s.fireTime === f).length === ITEMS);
      },
      { timeoutMs: 20_000, message: 'a fire with all 9 items running' },
    );
    cluster.signal('w3', 'SIGKILL');
    await waitFor(() => endedFires('givenup').includes(fire), { timeoutMs: 20_000, message: `afterFire of the fire ${fire} the kill cut` });
    await new Promise((r) => setTimeout(r, 1_000));
    const calls = cluster.listenerCalls('givenup').filter((l) => l.fireTime === fire);
    expect(calls.map((l) => l.event).sort()).toEqual(['afterFire', 'beforeFire']);
    const after = calls.find((l) => l.event === 'afterFire')!;
    expect(after.instanceId).not.toBe('w3');
    // Reported missed by the leader, not run elsewhere.
    expect(cluster.lines.filter((l) => l.kind === 'missed' && l.fireTime === fire).length).toBe(3);
    expect(cluster.starts('givenup').filter((s) => s.fireTime === fire && s.source === 'FAILOVER')).toEqual([]);
    const survivorsEnds = execsOf('givenup', fire).filter((l) => l.event === 'finish');
    expect(survivorsEnds).toHaveLength(6);
    for (const end of survivorsEnds) expect(after.at).toBeGreaterThanOrEqual(end.at);
  });

  it('a job stored before its code had fire listeners: the workers mark its stored config, and the listeners run', async () => {
    const stored: JobSpec = { name: 'upgraded', cron: '0/1 * * * * ?', shardingTotalCount: 3 };
    await cluster.start('old', 'worker', [stored]);
    cluster.signal('old', 'SIGTERM');
    expect(await cluster.exited('old')).toBe(0);
    await startCluster({ ...stored, fireListeners: true });
    await waitFor(() => endedFires('upgraded').length >= 2, { timeoutMs: 20_000, message: '2 fires of upgraded with afterFire' });
    for (const fireTime of endedFires('upgraded')) {
      const calls = cluster.listenerCalls('upgraded').filter((l) => l.fireTime === fireTime);
      expect(calls.map((l) => [l.event, l.items]).sort()).toEqual([['afterFire', 3], ['beforeFire', 3]]);
    }
  });
});
