import fs from 'node:fs';
import path from 'node:path';
import { ErrorCodes, ShardcronError } from '../shared/errors';
import { silentLogger, type Logger } from '../shared/logger';
import type { RedisNode } from '../shared/redis/redis-target';
import { LocalServer } from './local-server';
import { ChildService, findExecutable, makeTempDir, tcpExchange } from './child-service';
import { getFreePort, LOOPBACK } from './free-port';

/**
 * Finds the redis-server executable: `SHARDCRON_REDIS_SERVER` if set, else `redis-server` on PATH.
 * Throws a MISSING_DEPENDENCY ShardcronError naming what is missing and how to install it.
 */
export function findRedisServer(env: NodeJS.ProcessEnv = process.env): string {
  const name = env.SHARDCRON_REDIS_SERVER || 'redis-server';
  const found = findExecutable(name, env);
  if (found) return found;
  const what = env.SHARDCRON_REDIS_SERVER
    ? `SHARDCRON_REDIS_SERVER=${env.SHARDCRON_REDIS_SERVER} is not an executable file`
    : 'no redis-server executable on PATH';
  throw new ShardcronError(
    ErrorCodes.MISSING_DEPENDENCY,
    `Cannot start a local Redis: ${what}. Install it with \`apt-get update && apt-get install -y redis-server\` ` +
      '(Redis 6.2 or later), or set SHARDCRON_REDIS_SERVER to the path of a redis-server binary.',
    { executable: name },
  );
}

/** Options of {@link RedisServer.start}. */
export interface RedisServerOptions {
  /** Port; 0 or absent picks a free one. */
  port?: number;
  logger?: Logger;
  /** How long a start may take before it fails; default 15000. */
  startTimeoutMs?: number;
  /** Environment read by {@link findRedisServer}; default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** More arguments after the defaults, e.g. `['--replicaof', '127.0.0.1', '6380']` or `['--cluster-enabled', 'yes']`. */
  args?: readonly string[];
  /**
   * Lines of a config file written to the server's temp dir and passed first (`redis-server FILE ...`);
   * Sentinel needs one it can rewrite. `sentinel: true` runs `--sentinel`.
   */
  config?: readonly string[];
  sentinel?: boolean;
  /** Names the server in logs and errors (default `redis`). */
  name?: string;
}

/** True once the server answers PING with PONG (not `-LOADING`, not a refused connection). */
async function answersPing(port: number): Promise<boolean> {
  const reply = await tcpExchange(port, 'PING\r\n', { until: (text) => text.includes('\r\n') }).catch(() => '');
  return reply.startsWith('+PONG');
}

/**
 * A throwaway redis-server on 127.0.0.1, without persistence (`--save "" --appendonly no`): data does
 * not survive {@link stop}, {@link kill} or {@link restart}. For tests and `shardcron dev`.
 */
export class RedisServer extends LocalServer {
  private constructor(port: number, child: ChildService, removeTemp: () => void) {
    super(port, child, removeTemp);
  }

  /** Starts a server and resolves once it answers PING. */
  static async start(options: RedisServerOptions = {}): Promise<RedisServer> {
    const executable = findRedisServer(options.env);
    const port = options.port || (await getFreePort());
    const temp = makeTempDir('shardcron-redis-');
    const logger = (options.logger ?? silentLogger).child({ component: 'redis-server', port });
    const configFile = path.join(temp.root, 'redis.conf');
    if (options.config) fs.writeFileSync(configFile, `${options.config.join('\n')}\n`);
    const persistence = options.sentinel ? [] : ['--save', '', '--appendonly', 'no'];
    const child = new ChildService({
      name: options.name ?? 'redis', command: executable, port, logger, cwd: temp.root,
      args: [
        ...(options.config ? [configFile] : []),
        ...(options.sentinel ? ['--sentinel'] : []),
        '--port', String(port), '--bind', LOOPBACK, ...persistence,
        '--dir', temp.root, '--daemonize', 'no', '--loglevel', 'warning', '--logfile', '',
        ...(options.args ?? []),
      ],
      isReady: () => answersPing(port),
      startTimeoutMs: options.startTimeoutMs ?? 15_000,
      stopGraceMs: 3_000,
    });
    return new RedisServer(port, child, temp.remove).boot();
  }

  /** `redis://127.0.0.1:PORT`, for ioredis and BullMQ. */
  get url(): string { return `redis://${LOOPBACK}:${this.port}`; }

  /** `{ host: '127.0.0.1', port }`, for a Sentinel or Cluster node list. */
  get address(): RedisNode { return { host: LOOPBACK, port: this.port }; }
}
