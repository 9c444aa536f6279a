import { Redis } from 'ioredis';
import { LOOPBACK } from './free-port';

/**
 * Sends one command to the Redis (or Sentinel) on 127.0.0.1:`port` over a connection of its own and
 * returns the reply; rejects when nothing answers within `timeoutMs`. For the local engines'
 * readiness checks and fault injection, not for shardcron's own traffic.
 */
export async function redisCommand(port: number, args: readonly (string | number)[], timeoutMs = 1_000): Promise<unknown> {
  const client = new Redis({
    host: LOOPBACK, port, lazyConnect: true, connectTimeout: timeoutMs, commandTimeout: timeoutMs,
    maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false, enableReadyCheck: false,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const [command, ...rest] = args;
    return await client.call(String(command), ...rest.map(String));
  } finally {
    client.disconnect();
  }
}

/** `INFO section` as a map of its `key:value` lines. */
export async function redisInfo(port: number, section: string): Promise<Map<string, string>> {
  const text = String(await redisCommand(port, ['INFO', section]));
  return new Map(text.split('\r\n').filter((l) => l.includes(':')).map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1)]));
}
