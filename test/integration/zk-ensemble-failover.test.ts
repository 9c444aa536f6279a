/**
 * A 3-server ZooKeeper ensemble under a running cluster: kill -9 the server the leader is connected
 * to. Its client moves to another server within the session timeout: no session is lost (no new
 * election, no new worker incarnation) and no fire is missed.
 */
import * as fs from 'node:fs';
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperEnsemble } from '../../src/dev/zookeeper-server';
import { ProcessCluster, tcpPeerPorts } from '../helpers/process-cluster';
import { closeServices, startRedis, startZooKeeperEnsemble, waitFor } from '../helpers/services';

jest.setTimeout(120_000);

const JOB = { name: 'zkbeat', cron: '* * * * * ?', shardingTotalCount: 3, failover: true, sleepMs: 150 };
const SESSION_MS = 4_000;

let ensemble: ZooKeeperEnsemble;
let redis: RedisServer;
let cluster: ProcessCluster | undefined;

beforeAll(async () => {
  [ensemble, redis] = await Promise.all([startZooKeeperEnsemble(), startRedis()]);
});
afterAll(closeServices);
afterEach(async () => {
  await cluster?.close();
});

it("kill -9 the ZooKeeper server the leader is connected to: no session is lost, no fire missed", async () => {
  const c = (cluster = new ProcessCluster({ zk: ensemble.connectionString, redisUrl: redis.url, sessionTimeoutMs: SESSION_MS }));
  await Promise.all([...['w1', 'w2', 'w3'].map((w) => c.start(w, 'worker', [JOB])), c.start('leader', 'scheduler', [])]);
  await waitFor(() => c.starts(JOB.name).length >= 9 && c.incompleteFires(JOB.name, 3, Date.now() - 3_000, Date.now() - 1_500).length === 0, {
    timeoutMs: 30_000,
    message: 'complete fires before the kill',
  });
  const peers = tcpPeerPorts(c.pid('leader'));
  const server = ensemble.members.find((m) => peers.includes(m.clientPort));
  expect(server).toBeDefined();
  const killedAt = Date.now();
  await server!.kill();
  await waitFor(() => Date.now() > killedAt + 2 * SESSION_MS, { timeoutMs: 3 * SESSION_MS, intervalMs: 200 });
  const end = Date.now() - 1_500;
  // The leader now talks to a surviving member.
  const now = tcpPeerPorts(c.pid('leader'));
  const moved = ensemble.members.find((m) => m !== server && now.includes(m.clientPort));

  const zkEvents = c.lines.filter((l) => l.kind === 'zk');
  const figure = {
    scenario: 'ZooKeeper ensemble member kill -9 (the leader\'s)',
    sessionTimeoutMs: SESSION_MS,
    killedMember: server!.id,
    leaderNowOn: moved?.id,
    suspensions: zkEvents.map((e) => ({ node: e.node, event: e.event, afterKillMs: (e.at as number) - killedAt })),
  };
  process.stdout.write(`ZooKeeper member failover: ${JSON.stringify(figure)}\n`);
  if (process.env.SHARDCRON_TEST_FIGURES) fs.appendFileSync(process.env.SHARDCRON_TEST_FIGURES, `${JSON.stringify(figure)}\n`);

  expect(moved).toBeDefined();
  expect(zkEvents.filter((e) => e.event === 'lost')).toEqual([]);
  expect(c.lines.filter((l) => l.kind === 'registered')).toEqual([]);
  expect(c.lines.filter((l) => l.kind === 'leader')).toHaveLength(1);
  const firstFire = Math.min(...c.starts(JOB.name).map((s) => s.fireTime));
  expect(c.incompleteFires(JOB.name, 3, firstFire, end)).toEqual([]);
  expect(c.doubleCompletions(JOB.name)).toEqual([]);
});
