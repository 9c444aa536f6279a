/**
 * The servers of `shardcron dev --ha`: a ZooKeeper ensemble of 3 and a Sentinel-managed Redis
 * (primary, replica, 3 Sentinels), all started here on free loopback ports, so that one can kill a
 * ZooKeeper server or the Redis primary from another terminal and watch the cluster carry on.
 */
import { RedisSentinelGroup } from '../dev/redis-sentinel';
import type { RedisServer } from '../dev/redis-server';
import { ZooKeeperEnsemble } from '../dev/zookeeper-server';
import { clockTime } from './dev-log';
import { DEV_ZK_TICK_MS, DevAbort, ensureInstalled, serverLogger, type DevServices, type EnsureDevServicesOptions } from './dev-services';

/** How often the Sentinels are asked which server is the primary, to tell the user when it changes. */
const PRIMARY_WATCH_MS = 1_000;

function row(name: string, address: string, pid: number | undefined): string {
  return `    ${name.padEnd(12)} ${address.padEnd(16)} pid ${pid ?? '-'}`;
}

/** Starts the ensemble and the Sentinel group. Throws {@link DevAbort} when a server is missing or fails to start. */
export async function startHaServices(options: EnsureDevServicesOptions): Promise<DevServices> {
  const { env, print } = options;
  await ensureInstalled({ zookeeper: true, redis: true }, options);
  const logger = serverLogger(print);
  const [zk, redis] = await Promise.allSettled([
    ZooKeeperEnsemble.start({ tickTimeMs: DEV_ZK_TICK_MS, logger, env }),
    RedisSentinelGroup.start({ logger, env }),
  ]);
  const started = [zk, redis].flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = [zk, redis].find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed || zk.status !== 'fulfilled' || redis.status !== 'fulfilled') {
    await Promise.allSettled(started.map((s) => s.close()));
    print(`Could not start a local server: ${(failed?.reason as Error | undefined)?.message}`);
    throw new DevAbort(1, 'local server failed to start');
  }
  const ensemble = zk.value;
  const group = redis.value;

  // Tell the user when the Sentinels promote another server (after a kill -9 of the primary).
  let primary: RedisServer | undefined = await group.primary();
  const watch = setInterval(() => {
    void group.primary().then((now) => {
      if (!now || now === primary) return;
      primary = now;
      print(`${clockTime(Date.now())}  the Sentinels promoted redis ${now.address.host}:${now.port} (pid ${now.pid}) to primary`);
    });
  }, PRIMARY_WATCH_MS);
  watch.unref();

  const describe = (): string[] => {
    const [first, replica] = group.servers;
    const roleOf = (s: RedisServer) => (s === primary ? 'primary' : 'replica');
    return [
      `  ${'zookeeper'.padEnd(10)} ${ensemble.connectionString}  (ensemble of ${ensemble.members.length} started here, tick ${DEV_ZK_TICK_MS} ms)`,
      ...ensemble.members.map((m) => row(`server ${m.id}`, `127.0.0.1:${m.clientPort}`, m.pid)),
      `  ${'redis'.padEnd(10)} primary ${group.name} via Sentinels ${group.sentinelList}  (started here)`,
      ...[first, replica].map((s) => row(roleOf(s), `127.0.0.1:${s.port}`, s.pid)),
      ...group.sentinels.map((s, i) => row(`sentinel ${i + 1}`, `127.0.0.1:${s.port}`, s.pid)),
      `  ${'try'.padEnd(10)} from another terminal: kill -9 ${ensemble.members[0].pid} (a ZooKeeper server), or kill -9 ${primary?.pid} (the Redis primary):`,
      `  ${''.padEnd(10)} the jobs go on; the Sentinels promote the replica within about 3 s`,
    ];
  };

  let closing: Promise<void> | undefined;
  const closeAll = () => Promise.allSettled([group.close(), ensemble.close()]).then(() => undefined);
  return {
    zookeeper: { address: ensemble.connectionString, connect: ensemble.connectionString, startedHere: true },
    redis: { address: `primary ${group.name} via Sentinels ${group.sentinelList}`, connect: `redis://${group.name}`, startedHere: true },
    local: true,
    nodeEnv: {
      SHARDCRON_ZK: ensemble.connectionString,
      // The host of the URL is not used with Sentinels; the name reads as what it stands for.
      SHARDCRON_REDIS_URL: `redis://${group.name}`,
      SHARDCRON_REDIS_SENTINELS: group.sentinelList,
      SHARDCRON_REDIS_SENTINEL_NAME: group.name,
      // Empty = unset: a Cluster of the caller's environment would exclude the Sentinels.
      SHARDCRON_REDIS_CLUSTER_NODES: '',
    },
    describe,
    close: () => {
      clearInterval(watch);
      return (closing ??= closeAll());
    },
    kill: async () => {
      clearInterval(watch);
      await Promise.allSettled([...group.sentinels, ...group.servers].map((s) => s.kill()));
      await Promise.allSettled(ensemble.members.map((m) => m.kill()));
      await closeAll();
    },
  };
}
