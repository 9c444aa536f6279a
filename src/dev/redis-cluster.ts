/**
 * A Redis Cluster on this machine, for tests: N primaries (`redis-server --cluster-enabled yes`) on
 * free loopback ports, joined with `redis-cli --cluster create`, ready once every node reports
 * `cluster_state:ok`. Each node is a {@link RedisServer} (stop, kill, restart); everything is
 * removed on close.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { ErrorCodes, ShardcronError } from '../shared/errors';
import { silentLogger, type Logger } from '../shared/logger';
import type { RedisNode } from '../shared/redis/redis-target';
import { findExecutable, pollUntil } from './child-service';
import { getFreePorts } from './free-port';
import { redisCommand } from './redis-command';
import { findRedisServer, RedisServer } from './redis-server';

/**
 * Finds redis-cli: next to the redis-server in use, else on PATH. Throws MISSING_DEPENDENCY naming
 * what is missing and how to install it.
 */
export function findRedisCli(env: NodeJS.ProcessEnv = process.env): string {
  const server = findRedisServer(env);
  const found = findExecutable(path.join(path.dirname(server), 'redis-cli'), env) ?? findExecutable('redis-cli', env);
  if (found) return found;
  throw new ShardcronError(
    ErrorCodes.MISSING_DEPENDENCY,
    `Cannot create a local Redis Cluster: no redis-cli next to ${server} nor on PATH. Install it with ` +
      '`apt-get update && apt-get install -y redis-tools` (Redis 6.2 or later).',
    { executable: 'redis-cli' },
  );
}

/** Options of {@link RedisClusterGroup.start}. */
export interface RedisClusterGroupOptions {
  /** Primaries; default 3 (the least `redis-cli --cluster create` accepts). */
  primaries?: number;
  /** `cluster-node-timeout`; default 2000. */
  nodeTimeoutMs?: number;
  logger?: Logger;
  /** How long creating the cluster may take once the nodes run; default 30000. */
  startTimeoutMs?: number;
  env?: NodeJS.ProcessEnv;
}

function run(command: string, args: readonly string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, [...args], { timeout: timeoutMs }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${path.basename(command)} ${args.join(' ')} failed: ${err.message}\n${stdout}${stderr}`));
      else resolve(stdout);
    });
  });
}

/** A Redis Cluster of primaries only (no replicas: a killed node's slots stay down until it is restarted). */
export class RedisClusterGroup {
  private closing: Promise<void> | undefined;

  private constructor(readonly nodes: readonly RedisServer[]) {}

  static async start(options: RedisClusterGroupOptions = {}): Promise<RedisClusterGroup> {
    const env = options.env ?? process.env;
    const cli = findRedisCli(env);
    const count = options.primaries ?? 3;
    if (!Number.isInteger(count) || count < 3) throw new RangeError(`a Redis Cluster needs at least 3 primaries, got ${count}`);
    const logger = options.logger ?? silentLogger;
    const timeoutMs = options.startTimeoutMs ?? 30_000;
    const ports = await getFreePorts(count);
    const results = await Promise.allSettled(ports.map((port, i) => RedisServer.start({
      port, logger, env, name: `redis cluster node ${i + 1}`,
      // nodes.conf lives in the node's own temp dir, so a restart rejoins with the same node id.
      args: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', String(options.nodeTimeoutMs ?? 2_000)],
    })));
    const nodes = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const group = new RedisClusterGroup(nodes);
    try {
      const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed) throw failed.reason;
      await run(cli, ['--cluster', 'create', ...group.seedList.split(','), '--cluster-yes'], timeoutMs);
      await group.waitUntilOk(timeoutMs);
      return group;
    } catch (err) {
      await group.close();
      throw err;
    }
  }

  /** Every node's address, for `SHARDCRON_REDIS_CLUSTER_NODES` (as `host:port,...` from {@link seedList}). */
  get seeds(): RedisNode[] {
    return this.nodes.map((n) => n.address);
  }

  /** `127.0.0.1:p1,127.0.0.1:p2,...`. */
  get seedList(): string {
    return this.seeds.map((a) => `${a.host}:${a.port}`).join(',');
  }

  /** The node serving `key`'s slot now (`CLUSTER KEYSLOT`, then `CLUSTER SLOTS`). */
  async nodeOf(key: string): Promise<RedisServer | undefined> {
    const asker = this.nodes.find((n) => n.running);
    if (!asker) return undefined;
    const slot = Number(await redisCommand(asker.port, ['CLUSTER', 'KEYSLOT', key]));
    const ranges = (await redisCommand(asker.port, ['CLUSTER', 'SLOTS'])) as Array<[number, number, [string, number, ...unknown[]]]>;
    const owner = ranges.find(([from, to]) => slot >= from && slot <= to)?.[2][1];
    return this.nodes.find((n) => n.port === Number(owner));
  }

  /** Resolves once every running node reports `cluster_state:ok`. */
  async waitUntilOk(timeoutMs = 30_000): Promise<void> {
    await pollUntil(async () => {
      for (const node of this.nodes.filter((n) => n.running)) {
        if ((await redisInfoCluster(node.port)) !== 'ok') return false;
      }
      return true;
    }, { timeoutMs, intervalMs: 100, describe: () => 'every Redis Cluster node to report cluster_state:ok' });
  }

  close(): Promise<void> {
    return (this.closing ??= Promise.allSettled(this.nodes.map((n) => n.close())).then((results) => {
      const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed) throw failed.reason;
    }));
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/** A node's `cluster_state` from `CLUSTER INFO`, or `down` when it does not answer. */
async function redisInfoCluster(port: number): Promise<string> {
  const text = String(await redisCommand(port, ['CLUSTER', 'INFO']).catch(() => ''));
  return /cluster_state:(\w+)/.exec(text)?.[1] ?? 'down';
}
