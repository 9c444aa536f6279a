/**
 * The fire state's Lua scripts on a Redis Cluster: every key of a fire is in the namespace's hash
 * slot, so each script runs on the one node that owns it (a script whose keys span slots is refused).
 */
import type { RedisClusterGroup } from '../../src/dev/redis-cluster';
import { defineJob } from '../../src/shared/config/job-definition';
import { createLogger } from '../../src/shared/logger';
import { createRedisClient, type RedisClient } from '../../src/shared/redis/redis-connection';
import type { ExecutionRequest } from '../../src/shared/registry/execution-request';
import { FireListeners } from '../../src/worker/fire-listeners';
import { closeServices, startRedisCluster } from '../helpers/services';

let redis: RedisClusterGroup;
const clients: RedisClient[] = [];

beforeAll(async () => {
  redis = await startRedisCluster();
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())));
  await closeServices();
});

it('beforeFire and afterFire once per fire, with 3 workers on a Redis Cluster', async () => {
  const calls: string[] = [];
  const definition = defineJob({
    name: 'clustered',
    execute: () => undefined,
    listeners: { beforeFire: (f) => void calls.push(`before:${f.fireTime}`), afterFire: (f) => void calls.push(`after:${f.fireTime}`) },
  });
  const workers = ['w1', 'w2', 'w3'].map((instanceId) => {
    const client = createRedisClient({ url: 'redis://127.0.0.1', clusterNodes: redis.seeds });
    clients.push(client);
    return new FireListeners({ namespace: 'clu', instanceId, redis: () => client, abortSignal: () => new AbortController().signal, log: createLogger({ level: 'silent' }) });
  });
  const request = (item: number, fireTime: number): ExecutionRequest => ({ job: 'clustered', item, fireTime, source: 'NORMAL', epoch: 1, fireItems: 6 });
  for (const fireTime of [1_000, 2_000]) {
    const items = Array.from({ length: 6 }, (_, item) => item);
    expect(await Promise.all(items.map((item) => workers[item % 3].beforeItem(definition, request(item, fireTime))))).toEqual(Array(6).fill(true));
    await Promise.all(items.map((item) => workers[item % 3].itemEnded(definition, request(item, fireTime))));
  }
  expect(calls).toEqual(['before:1000', 'after:1000', 'before:2000', 'after:2000']);
});
