/**
 * Issue 22's 3-node shape, each case twice: three processes with both roles, ZooKeeper ticking every
 * 500 ms, 2 s sessions, 9 items every second with failover on; kill -9 a process that is not the
 * leader, or the leader, while it runs items. Every item of every fire from the kill on starts,
 * none completes twice, no item runs on two instances at once, and no item runs later than session
 * timeout + one tick + 1 s because of the kill. `npm run failover-shapes` repeats them ten times each.
 */
import * as fs from 'node:fs';
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { FAILOVER_BOUND_MS, runFailoverShape, SHAPE_TICK_MS } from '../helpers/failover-shape';
import { closeServices, startRedis, startZooKeeper } from '../helpers/services';

/** A process joins at the first fire planned after it registers: a period plus the dispatch lead, and some slack. */
const JOIN_BOUND_MS = 1_000 + 300 + 500;

let zk: ZooKeeperServer;
let redis: RedisServer;

beforeAll(async () => {
  [zk, redis] = await Promise.all([startZooKeeper({ tickTimeMs: SHAPE_TICK_MS }), startRedis()]);
});
afterAll(closeServices);

describe.each([
  ['non-leader', false],
  ['leader', false],
  ['non-leader', true],
  ['leader', true],
] as const)('kill -9 the %s of three processes with both roles (misfire %s)', (victim, misfire) => {
  it.each([1, 2])('run %i: no fire lost or doubled, failover within the bound', async () => {
    const r = await runFailoverShape({ zk: zk.connectionString, redisUrl: redis.url, victim, misfire, settleMs: 8_000 });
    if (process.env.SHARDCRON_TEST_FIGURES) {
      fs.appendFileSync(process.env.SHARDCRON_TEST_FIGURES, `${JSON.stringify({ scenario: `3 nodes, kill ${victim}, misfire ${misfire}`, inFlightRestartMs: r.inFlightRestartMs, maxDelayMs: r.maxDelayMs })}\n`);
    }
    // One object, so that a failure shows everything at once, with the story of what went wrong.
    expect({
      neverStarted: r.neverStarted,
      neverCompleted: r.neverCompleted,
      doubled: r.doubled,
      overlaps: r.overlaps,
      tooLate: r.maxDelayMs > FAILOVER_BOUND_MS ? r.maxDelayMs : 0,
      inFlightRestartedLate: r.inFlightRestartMs.filter((ms) => ms > FAILOVER_BOUND_MS),
      joinedLate: Object.values(r.joinMs).filter((ms) => ms > JOIN_BOUND_MS),
      stories: r.stories,
    }).toEqual({ neverStarted: [], neverCompleted: [], doubled: [], overlaps: 0, tooLate: 0, inFlightRestartedLate: [], joinedLate: [], stories: [] });
    expect(r.inFlightRestartMs.length).toBeGreaterThan(0);
    expect(r.fires.length).toBeGreaterThanOrEqual(5);
    // One kill is one pile-up: at most one MISFIRE run per item (none at all with misfire off).
    expect(r.misfireRunsPerItem).toBeLessThanOrEqual(misfire ? 1 : 0);
  }, 60_000);
});
