import { loadEnvConfig } from '../shared/config/env-config';
import { createRedisClient } from '../shared/redis/redis-connection';
import { redisTarget } from '../shared/redis/redis-target';
import { queuePrefix } from '../shared/registry/queue-names';
import { silentLogger, type Logger } from '../shared/logger';
import { ZkClient } from '../shared/zk';
import { Admin, type AdminOptions } from './admin';

/** Options of {@link openAdmin}; each overrides what the SHARDCRON_* variables say. */
export interface OpenAdminOptions {
  /** Environment to read; default `process.env`. Validated like a node's (one error naming every bad variable). */
  env?: Record<string, string | undefined>;
  /** How long one connection attempt to ZooKeeper (and Redis) may take; default SHARDCRON_ZK_CONNECT_TIMEOUT_MS. */
  connectTimeoutMs?: number;
  /** Retries of a failed ZooKeeper connect or operation; default SHARDCRON_ZK_MAX_RETRIES. */
  zkRetries?: number;
  logger?: Logger;
  readModel?: AdminOptions['readModel'];
}

/** Reconnect attempts of the admin's Redis connection before its commands fail. */
const REDIS_RECONNECTS = 3;

/**
 * Opens an {@link Admin} on its own ZooKeeper and Redis connections, configured by the SHARDCRON_*
 * variables (the CLI's way in); its close() closes both. Throws INVALID_CONFIG naming every bad
 * variable, ZK_CONNECT_FAILED when ZooKeeper does not answer.
 */
export async function openAdmin(options: OpenAdminOptions = {}): Promise<Admin> {
  const env = loadEnvConfig(options.env ?? process.env);
  const logger = options.logger ?? silentLogger;
  const connectTimeoutMs = options.connectTimeoutMs ?? env.zk.connectTimeoutMs;
  const zk = await new ZkClient({
    connectionString: env.zk.connectionString,
    namespace: env.namespace,
    sessionTimeoutMs: env.zk.sessionTimeoutMs,
    connectTimeoutMs,
    retry: { baseSleepMs: env.zk.baseSleepMs, maxSleepMs: env.zk.maxSleepMs, maxRetries: options.zkRetries ?? env.zk.maxRetries },
    ...(env.zk.digest && { digest: env.zk.digest }),
    logger,
  }).start();
  // Connected at first use (the read commands never need Redis); commands fail after a few
  // reconnects instead of waiting for ever as a node's do, so an unreachable Redis is reported
  // within seconds.
  const target = redisTarget(env);
  const redis = createRedisClient(target, { lazyConnect: true, failAfterRetries: REDIS_RECONNECTS, logger, name: 'admin' });
  return new Admin({ zk, redis, queuePrefix: queuePrefix(env.namespace, target), namespace: env.namespace, logger, readModel: options.readModel, ownsConnections: true });
}
