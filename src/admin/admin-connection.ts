import IORedis, { type Redis } from 'ioredis';
import { loadEnvConfig } from '../shared/config/env-config';
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
 * A Redis connection for a short-lived admin: it connects on first use (the read commands never
 * need Redis), and its commands fail after a few reconnect attempts instead of waiting forever as a
 * node's connection does, so an unreachable Redis is reported within seconds.
 */
function adminRedis(url: string, connectTimeoutMs: number, log: Logger): Redis {
  const redis = new IORedis(url, {
    lazyConnect: true,
    connectTimeout: connectTimeoutMs,
    maxRetriesPerRequest: 1,
    retryStrategy: (times) => (times > REDIS_RECONNECTS ? null : Math.min(times * 200, 1_000)),
  });
  redis.on('error', (err: Error) => log.debug({ err }, 'redis connection error'));
  return redis;
}

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
  const redis = adminRedis(env.redisUrl, connectTimeoutMs, logger);
  return new Admin({ zk, redis, namespace: env.namespace, logger, readModel: options.readModel, ownsConnections: true });
}
