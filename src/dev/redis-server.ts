import { ErrorCodes, ShardcronError } from '../shared/errors';
import { silentLogger, type Logger } from '../shared/logger';
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
export class RedisServer {
  private closing: Promise<void> | undefined;

  private constructor(
    /** TCP port. */
    readonly port: number,
    private readonly child: ChildService,
    private readonly removeTemp: () => void,
  ) {}

  /** Starts a server and resolves once it answers PING. */
  static async start(options: RedisServerOptions = {}): Promise<RedisServer> {
    const executable = findRedisServer(options.env);
    const port = options.port || (await getFreePort());
    const temp = makeTempDir('shardcron-redis-');
    const logger = (options.logger ?? silentLogger).child({ component: 'redis-server', port });
    const child = new ChildService({
      name: 'redis', command: executable, port, logger, cwd: temp.root,
      args: [
        '--port', String(port), '--bind', LOOPBACK, '--save', '', '--appendonly', 'no',
        '--dir', temp.root, '--daemonize', 'no', '--loglevel', 'warning', '--logfile', '',
      ],
      isReady: () => answersPing(port),
      startTimeoutMs: options.startTimeoutMs ?? 15_000,
      stopGraceMs: 3_000,
    });
    const server = new RedisServer(port, child, temp.remove);
    try {
      await child.start();
    } catch (err) {
      await server.close();
      throw err;
    }
    return server;
  }

  /** `redis://127.0.0.1:PORT`, for ioredis and BullMQ. */
  get url(): string { return `redis://${LOOPBACK}:${this.port}`; }

  /** Process id while the server runs. */
  get pid(): number | undefined { return this.child.pid; }

  /** True while the process runs (it may not answer yet, or be SIGSTOPped). */
  get running(): boolean { return this.child.running; }

  /** Fault injection: SIGTERM, SIGKILL after 3 s. Keeps the port; the data is gone. */
  stop(): Promise<void> { return this.child.stop(); }

  /** Fault injection: SIGKILL now. Keeps the port; the data is gone. */
  kill(): Promise<void> { return this.child.kill(); }

  /** Stops the server if it runs, starts an empty one on the same port, and waits until it answers. */
  async restart(): Promise<void> {
    if (this.closing) throw new ShardcronError(ErrorCodes.CLOSED, `redis on port ${this.port} is closed`);
    await this.child.stop();
    await this.child.start();
  }

  /** Stops the server and removes its temp dir; idempotent. */
  close(): Promise<void> { return (this.closing ??= this.doClose()); }

  /** Same as {@link close}, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> { return this.close(); }

  private async doClose(): Promise<void> {
    try { await this.child.stop(); } finally { this.removeTemp(); }
  }
}
