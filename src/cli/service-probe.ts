/**
 * Does ZooKeeper answer? Does Redis? Used by `shardcron ping` (the health check) and by
 * `shardcron dev` to decide whether to start its own servers. Probes only read: they never create
 * the namespace or a key, so a health check cannot change what it checks.
 */
import net from 'node:net';
import IORedis from 'ioredis';
import * as zookeeper from 'node-zookeeper-client';
import type { ZkServer } from '../shared/config/env-config';
import { createRedisClient } from '../shared/redis/redis-connection';
import { redactRedisUrl, redisTopology, type RedisTarget } from '../shared/redis/redis-target';

/** What a probe found. `ms` is how long the answer took. */
export type ProbeResult = { ok: true; ms: number } | { ok: false; reason: string };

/** Resolves with the value, or with `onTimeout()` once `ms` have passed. */
function withDeadline<T>(work: Promise<T>, ms: number, onTimeout: () => T | Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<T>((resolve) => (timer = setTimeout(() => resolve(onTimeout()), ms)));
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}

export { redactRedisUrl };

/** True when something accepts TCP connections at host:port within `timeoutMs`. */
export function isListening(host: string, port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (open: boolean) => {
      socket.destroy();
      resolve(open);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** Options of {@link probeZooKeeper}. */
export interface ZooKeeperProbeOptions {
  connectionString: string;
  /** Node whose existence is read once connected, proving the session serves requests. */
  namespace: string;
  timeoutMs: number;
  digest?: { readonly user: string; readonly password: string };
  /** The servers of the connection string; when given, a timeout says whether any of them accepted TCP. */
  servers?: readonly ZkServer[];
}

/**
 * Opens a ZooKeeper session and reads `/{namespace}` (which may be absent). Fails when no server of
 * the ensemble answers within the timeout or the digest credentials are refused.
 */
export function probeZooKeeper(options: ZooKeeperProbeOptions): Promise<ProbeResult> {
  const started = Date.now();
  const client = zookeeper.createClient(options.connectionString, { sessionTimeout: Math.max(options.timeoutMs, 4_000), spinDelay: 200, retries: 0 });
  if (options.digest) client.addAuthInfo('digest', Buffer.from(`${options.digest.user}:${options.digest.password}`));
  const work = new Promise<ProbeResult>((resolve) => {
    client.once('authenticationFailed', () => resolve({ ok: false, reason: 'the server refused the digest credentials (SHARDCRON_ZK_DIGEST)' }));
    client.once('connected', () => {
      client.exists(`/${options.namespace}`, (err) => {
        if (err) resolve({ ok: false, reason: `connected, but reading /${options.namespace} failed: ${String(err)}` });
        else resolve({ ok: true, ms: Date.now() - started });
      });
    });
    client.connect();
  });
  const listening = Promise.all((options.servers ?? []).map((s) => isListening(s.host, s.port, Math.min(options.timeoutMs, 1_000))));
  const timedOut = async (): Promise<ProbeResult> => {
    const refused = options.servers !== undefined && !(await listening).some(Boolean);
    return { ok: false, reason: `no answer within ${options.timeoutMs} ms${refused ? ' (nothing listens there: is ZooKeeper running?)' : ''}` };
  };
  return withDeadline(work, options.timeoutMs, timedOut).finally(() => client.close());
}

/** Connects to Redis and sends PING; fails when there is no PONG within the timeout. */
export function probeRedis(url: string, timeoutMs: number): Promise<ProbeResult> {
  const started = Date.now();
  const client = new IORedis(url, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  });
  let lastError: Error | undefined;
  client.on('error', (err: Error) => (lastError = err));
  const work = (async (): Promise<ProbeResult> => {
    try {
      await client.connect();
      const reply = await client.ping();
      return reply === 'PONG' ? { ok: true, ms: Date.now() - started } : { ok: false, reason: `PING answered ${JSON.stringify(reply)}` };
    } catch (err) {
      // ioredis reports "Connection is closed." after a refused connect; the 'error' event has the cause.
      return { ok: false, reason: lastError?.message ?? ((err as Error).message || String(err)) };
    }
  })();
  const timedOut = (): ProbeResult => ({ ok: false, reason: `no answer within ${timeoutMs} ms${lastError ? ` (${lastError.message})` : ''}` });
  return withDeadline(work, timeoutMs, timedOut).finally(() => client.disconnect());
}

/**
 * Like {@link probeRedis}, for any target: through the Sentinels to the primary they name, or to the
 * nodes of a Cluster (which answers PING once its slots are known).
 */
export function probeRedisTarget(target: RedisTarget, timeoutMs: number): Promise<ProbeResult> {
  if (redisTopology(target) === 'standalone') return probeRedis(target.url, timeoutMs);
  const started = Date.now();
  const client = createRedisClient(target);
  let lastError: Error | undefined;
  client.on('error', (err: Error) => (lastError = err));
  const work = client.ping().then(
    (reply): ProbeResult => (reply === 'PONG' ? { ok: true, ms: Date.now() - started } : { ok: false, reason: `PING answered ${JSON.stringify(reply)}` }),
    (err: Error): ProbeResult => ({ ok: false, reason: err.message }),
  );
  const timedOut = (): ProbeResult => ({ ok: false, reason: `no answer within ${timeoutMs} ms${lastError ? ` (${lastError.message})` : ''}` });
  return withDeadline(work, timeoutMs, timedOut).finally(() => client.disconnect());
}

/**
 * Quick reachability check for `shardcron dev`: a refused TCP connection on every server answers
 * at once, so a fresh machine does not wait for a session timeout before starting its own ZooKeeper.
 */
export async function zooKeeperAnswers(servers: readonly ZkServer[], connectionString: string, namespace: string, timeoutMs: number): Promise<boolean> {
  const open = await Promise.all(servers.map((s) => isListening(s.host, s.port)));
  if (!open.some(Boolean)) return false;
  return (await probeZooKeeper({ connectionString, namespace, timeoutMs })).ok;
}
