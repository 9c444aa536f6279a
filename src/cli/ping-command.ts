/** `shardcron ping`: the health check. Exit 0 when ZooKeeper and Redis both answer, else 1. */
import { loadEnvConfig, type ShardcronEnvConfig } from '../shared/config/env-config';
import { ConfigError } from '../shared/errors';
import { ExitCode } from './exit-codes';
import type { CliIo } from './io';
import { describeRedisTarget, redisTarget } from '../shared/redis/redis-target';
import { probeRedisTarget, probeZooKeeper, type ProbeResult } from './service-probe';

function describe(result: ProbeResult): string {
  return result.ok ? `ok (${result.ms} ms)` : `FAILED: ${result.reason}`;
}

/** Probes both servers at once, each within SHARDCRON_ZK_CONNECT_TIMEOUT_MS, and prints one line per server. */
export async function runPing(io: CliIo): Promise<ExitCode> {
  let config: ShardcronEnvConfig;
  try {
    config = loadEnvConfig(io.env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    io.err(err.message);
    return ExitCode.USAGE;
  }
  const timeoutMs = config.zk.connectTimeoutMs;
  const [zk, redis] = await Promise.all([
    probeZooKeeper({ connectionString: config.zk.connectionString, namespace: config.namespace, timeoutMs, digest: config.zk.digest, servers: config.zk.servers }),
    probeRedisTarget(redisTarget(config), timeoutMs),
  ]);
  const report = (name: string, result: ProbeResult) => (result.ok ? io.out : io.err)(`${name}: ${describe(result)}`);
  report(`zookeeper ${config.zk.connectionString}`, zk);
  report(`redis ${describeRedisTarget(redisTarget(config))}`, redis);
  return zk.ok && redis.ok ? ExitCode.OK : ExitCode.FAILURE;
}
