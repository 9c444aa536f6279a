/**
 * The leader removes the `servers/{ip}` nodes of addresses no live instance has had for the
 * retention (a rolling deploy onto new addresses left them for good), keeps an operator's DISABLED
 * one and every live address's, and makes a live worker's node again when it is missing. Real
 * ZooKeeper and Redis; a leader and three workers on three addresses in this process.
 */
import type { RedisServer } from '../../src/dev/redis-server';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import type { ShardcronNode } from '../../src/node';
import { defineJob } from '../../src/shared/config/job-definition';
import { registryPaths as paths } from '../../src/shared/registry/registry-paths';
import type { ZkClient } from '../../src/shared/zk';
import { TestCluster } from '../helpers/cluster';
import { closeServices, startRedis, startZooKeeper, waitFor } from '../helpers/services';
import { closeZkClients, connectZk } from '../helpers/zk';

let zkServer: ZooKeeperServer;
let redisServer: RedisServer;
let cluster: TestCluster;
let zk: ZkClient;

const every = (name: string) => defineJob({ name, cron: '* * * * * ?', shardingTotalCount: 2, execute: () => undefined });
const ALPHA = every('alpha');
const BETA = every('beta');
/** The leader's retention in this test: an address gone this long loses its ENABLED nodes. */
const RETENTION_MS = 1_000;

/** `job`'s servers: ip -> value. */
async function servers(job: string): Promise<Record<string, string | undefined>> {
  const ips = (await zk.children(paths.jobServers(job))).sort();
  return Object.fromEntries(await Promise.all(ips.map(async (ip) => [ip, await zk.getText(paths.jobServer(job, ip))] as const)));
}

beforeAll(async () => {
  [zkServer, redisServer] = await Promise.all([startZooKeeper(), startRedis()]);
  cluster = new TestCluster(zkServer, redisServer);
  zk = await connectZk(zkServer.connectionString, { namespace: cluster.namespace });
});

afterAll(async () => {
  await cluster?.close();
  await closeZkClients();
  await closeServices();
});

describe('servers of gone addresses', () => {
  it('go once no live instance has had their address for the retention; DISABLED ones and live ones stay; a live one that went is made again', async () => {
    await cluster.start({ instanceId: 'leader', roles: ['scheduler'], serverRetentionMs: RETENTION_MS });
    const w1 = await cluster.start({ instanceId: 'w1', ip: '10.0.0.1', roles: ['worker'], jobs: [ALPHA, BETA] });
    const w2 = await cluster.start({ instanceId: 'w2', ip: '10.0.0.2', roles: ['worker'], jobs: [ALPHA, BETA] });
    const w3 = await cluster.start({ instanceId: 'w3', ip: '10.0.0.3', roles: ['worker'], jobs: [ALPHA] });
    const all = { '10.0.0.1': 'ENABLED', '10.0.0.2': 'ENABLED', '10.0.0.3': 'ENABLED' };
    await waitFor(async () => JSON.stringify(await servers('alpha')) === JSON.stringify(all), { message: 'every worker made its servers nodes' });
    // An operator disables 10.0.0.3 for alpha (`shardcron servers disable` writes the same).
    await zk.set(paths.jobServer('alpha', '10.0.0.3'), 'DISABLED');
    const closedAt = Date.now();
    for (const node of [w2, w3] as ShardcronNode[]) await node.close();
    cluster.nodes.splice(cluster.nodes.indexOf(w2), 1);
    cluster.nodes.splice(cluster.nodes.indexOf(w3), 1);

    await waitFor(async () => !('10.0.0.2' in (await servers('alpha'))) && !('10.0.0.2' in (await servers('beta'))), {
      timeoutMs: 15_000,
      message: "10.0.0.2's nodes removed",
    });
    // Not before the retention had passed since the address went (the first sweep only notes it).
    expect(Date.now() - closedAt).toBeGreaterThanOrEqual(RETENTION_MS);
    expect(await servers('alpha')).toEqual({ '10.0.0.1': 'ENABLED', '10.0.0.3': 'DISABLED' });
    expect(await servers('beta')).toEqual({ '10.0.0.1': 'ENABLED' });

    // A live worker's node that went (as when it registered just as the leader removed it) is
    // made again, ENABLED.
    await zk.delete(paths.jobServer('beta', '10.0.0.1'));
    await waitFor(async () => (await servers('beta'))['10.0.0.1'] === 'ENABLED', { timeoutMs: 10_000, message: "w1's beta node made again" });

    // The jobs keep running on the live worker: both items of alpha and beta, fire after fire.
    const after = Date.now();
    await cluster.waitForCompleteFires('alpha', 2, after, 2);
    await cluster.waitForCompleteFires('beta', 2, after, 2);
    expect(w1.worker).toBeDefined();

    // A worker back on a gone address makes its nodes again, as at its first start.
    await cluster.start({ instanceId: 'w2b', ip: '10.0.0.2', roles: ['worker'], jobs: [ALPHA, BETA] });
    await waitFor(async () => (await servers('beta'))['10.0.0.2'] === 'ENABLED', { message: "the new 10.0.0.2 worker's beta node" });
    expect((await servers('alpha'))['10.0.0.2']).toBe('ENABLED');
  });
});
