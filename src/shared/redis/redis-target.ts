/**
 * Where a node's Redis is: one endpoint, a Sentinel-managed primary, or a Redis Cluster. Built from
 * the environment by {@link redisTarget}; {@link createRedisClient} (redis-connection.ts) turns it
 * into the one ioredis client every role uses.
 */
import { ConfigError, ErrorCodes } from '../errors';
import type { ShardcronEnvConfig } from '../config/env-config';

/** A `host:port` of a Sentinel or a Cluster seed node. */
export interface RedisNode {
  readonly host: string;
  readonly port: number;
}

/**
 * The Redis of a namespace. `url` always applies for its user, password, TLS (`rediss://`) and, except
 * for a Cluster, its database; its host is the endpoint only when neither `clusterNodes` nor `sentinel`
 * is set. `clusterNodes` and `sentinel` exclude each other.
 */
export interface RedisTarget {
  readonly url: string;
  /** Seed nodes of a Redis Cluster (SHARDCRON_REDIS_CLUSTER_NODES). */
  readonly clusterNodes?: readonly RedisNode[];
  /** The Sentinels and the name they know the primary by (SHARDCRON_REDIS_SENTINELS, SHARDCRON_REDIS_SENTINEL_NAME). */
  readonly sentinel?: { readonly sentinels: readonly RedisNode[]; readonly name: string };
}

/** Which kind of deployment a target names. */
export type RedisTopology = 'standalone' | 'sentinel' | 'cluster';

/** The kind of deployment `target` names. */
export function redisTopology(target: RedisTarget): RedisTopology {
  if (target.clusterNodes && target.clusterNodes.length > 0) return 'cluster';
  return target.sentinel ? 'sentinel' : 'standalone';
}

/** The target of a validated environment (`SHARDCRON_REDIS_URL`, `..._CLUSTER_NODES`, `..._SENTINELS`/`..._SENTINEL_NAME`). */
export function redisTarget(config: Pick<ShardcronEnvConfig, 'redisUrl' | 'redisClusterNodes' | 'redisSentinel'>): RedisTarget {
  return {
    url: config.redisUrl,
    ...(config.redisClusterNodes !== undefined && { clusterNodes: config.redisClusterNodes }),
    ...(config.redisSentinel !== undefined && { sentinel: config.redisSentinel }),
  };
}

/** What a URL contributes besides its host: credentials, TLS, database. */
export interface RedisUrlParts {
  readonly username?: string;
  readonly password?: string;
  readonly tls: boolean;
  readonly db: number;
}

/**
 * The credentials, TLS and database of `target.url`. Throws a ConfigError naming the field when the
 * URL is malformed, or names a database other than 0 with a Cluster (a Cluster has only database 0).
 */
export function redisUrlParts(target: RedisTarget, field = 'SHARDCRON_REDIS_URL'): RedisUrlParts {
  let url: URL;
  try {
    url = new URL(target.url);
  } catch {
    throw new ConfigError(ErrorCodes.INVALID_CONFIG, 'Invalid Redis target', [
      { field, message: 'is not a valid URL (value not shown: it may hold a password); expected redis://[user:password@]host[:port][/db]' },
    ]);
  }
  const db = url.pathname.length > 1 ? Number(url.pathname.slice(1)) : 0;
  if (!Number.isInteger(db) || db < 0) {
    throw new ConfigError(ErrorCodes.INVALID_CONFIG, 'Invalid Redis target', [{ field, message: `database ${JSON.stringify(url.pathname.slice(1))} is not a number` }]);
  }
  if (db !== 0 && redisTopology(target) === 'cluster') {
    throw new ConfigError(ErrorCodes.INVALID_CONFIG, 'Invalid Redis target', [
      { field, message: `names database ${db}, but a Redis Cluster (SHARDCRON_REDIS_CLUSTER_NODES) has database 0 only; drop the /${db}` },
    ]);
  }
  return {
    ...(url.username !== '' && { username: decodeURIComponent(url.username) }),
    ...(url.password !== '' && { password: decodeURIComponent(url.password) }),
    tls: url.protocol === 'rediss:',
    db,
  };
}

/** For logs and messages: the endpoints, never the password. */
export function describeRedisTarget(target: RedisTarget): string {
  const list = (nodes: readonly RedisNode[]) => nodes.map((n) => (n.host.includes(':') ? `[${n.host}]:${n.port}` : `${n.host}:${n.port}`)).join(',');
  switch (redisTopology(target)) {
    case 'cluster':
      return `Redis Cluster ${list(target.clusterNodes!)}`;
    case 'sentinel':
      return `Sentinel primary ${target.sentinel!.name} via ${list(target.sentinel!.sentinels)}`;
    default:
      return redactRedisUrl(target.url);
  }
}

/** A Redis URL fit for printing: the password, if any, replaced by `***`. */
export function redactRedisUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparsable URL)';
  }
}
