import IORedis, { type Redis } from 'ioredis';

/**
 * A Redis connection as BullMQ needs it (`maxRetriesPerRequest: null`: commands wait for a
 * reconnect instead of failing). After a primary failover (Sentinel, managed Redis), a connection
 * still open to the demoted node gets READONLY errors; reconnecting (and resending the command)
 * reaches the new primary behind the same address.
 */
export function createRedisConnection(url: string): Redis {
  return new IORedis(url, {
    maxRetriesPerRequest: null,
    reconnectOnError: (err) => (err.message.startsWith('READONLY') ? 2 : false),
  });
}
