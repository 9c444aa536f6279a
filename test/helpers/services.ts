/**
 * Real ZooKeeper and Redis for integration suites, plus deadline-bound waiting helpers.
 *
 * ```ts
 * let zk: ZooKeeperServer;
 * beforeAll(async () => { zk = await startZooKeeper(); });
 * afterAll(closeServices);
 * ```
 */
import fs from 'node:fs';
import { liveChildPids, pollUntil } from '../../src/dev/child-service';
import { RedisClusterGroup, type RedisClusterGroupOptions } from '../../src/dev/redis-cluster';
import { RedisSentinelGroup, type RedisSentinelGroupOptions } from '../../src/dev/redis-sentinel';
import { RedisServer, type RedisServerOptions } from '../../src/dev/redis-server';
import {
  ZooKeeperEnsemble,
  ZooKeeperServer,
  type ZooKeeperEnsembleOptions,
  type ZooKeeperServerOptions,
} from '../../src/dev/zookeeper-server';

/** Tick of test servers: sessions from 400 ms (2 ticks) up to 60 s can be negotiated. */
export const TEST_TICK_MS = 200;

interface Closable {
  close(): Promise<void>;
}

/** Services started through these helpers and not closed yet. */
const started = new Set<Closable>();

function track<T extends Closable>(service: T): T {
  started.add(service);
  return service;
}

/** Starts a standalone ZooKeeper with {@link TEST_TICK_MS}; closed by {@link closeServices}. */
export async function startZooKeeper(options: ZooKeeperServerOptions = {}): Promise<ZooKeeperServer> {
  return track(await ZooKeeperServer.start({ tickTimeMs: TEST_TICK_MS, ...options }));
}

/** Starts a ZooKeeper ensemble (3 members by default) with {@link TEST_TICK_MS}; closed by {@link closeServices}. */
export async function startZooKeeperEnsemble(options: ZooKeeperEnsembleOptions = {}): Promise<ZooKeeperEnsemble> {
  return track(await ZooKeeperEnsemble.start({ tickTimeMs: TEST_TICK_MS, ...options }));
}

/** Starts a throwaway Redis; closed by {@link closeServices}. */
export async function startRedis(options: RedisServerOptions = {}): Promise<RedisServer> {
  return track(await RedisServer.start(options));
}

/** Starts a Redis primary, a replica and 3 Sentinels; closed by {@link closeServices}. */
export async function startRedisSentinels(options: RedisSentinelGroupOptions = {}): Promise<RedisSentinelGroup> {
  return track(await RedisSentinelGroup.start(options));
}

/** Starts a 3-primary Redis Cluster; closed by {@link closeServices}. */
export async function startRedisCluster(options: RedisClusterGroupOptions = {}): Promise<RedisClusterGroup> {
  return track(await RedisClusterGroup.start(options));
}

/** Closes every service started through these helpers (use as `afterAll(closeServices)`). */
export async function closeServices(): Promise<void> {
  const services = [...started].reverse();
  started.clear();
  const results = await Promise.allSettled(services.map((service) => service.close()));
  const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (failed) throw failed.reason;
}

/** Options of {@link waitFor} and {@link eventually}. */
export interface WaitOptions {
  /** Default 10000. */
  timeoutMs?: number;
  /** Default 50. */
  intervalMs?: number;
  /** What was awaited, for the error message. */
  message?: string;
}

/**
 * Polls `predicate` until it returns a truthy value and returns that value. A predicate that throws
 * counts as "not yet". After `timeoutMs` it throws an Error naming `message` and the last error.
 */
export async function waitFor<T>(
  predicate: () => T | Promise<T>,
  options: WaitOptions = {},
): Promise<Exclude<T, false | 0 | '' | null | undefined>> {
  let lastError: unknown;
  const timeoutMs = options.timeoutMs ?? 10_000;
  try {
    return await pollUntil(
      async () => {
        try {
          const value = await predicate();
          return value ? (value as Exclude<T, false | 0 | '' | null | undefined>) : undefined;
        } catch (err) {
          lastError = err;
          return undefined;
        }
      },
      { timeoutMs, intervalMs: options.intervalMs ?? 50, describe: () => options.message ?? 'condition' },
    );
  } catch (err) {
    const last = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
    throw new Error(`waitFor timed out after ${timeoutMs} ms: ${options.message ?? 'condition not met'}${last}`, {
      cause: err,
    });
  }
}

/**
 * Runs `assertion` (which throws, e.g. with `expect`) until it passes and returns its result.
 * On timeout rethrows the last assertion error, so the test shows the real mismatch.
 */
export async function eventually<T>(assertion: () => T | Promise<T>, options: WaitOptions = {}): Promise<T> {
  let lastError: unknown = new Error('assertion never ran');
  const timeoutMs = options.timeoutMs ?? 10_000;
  try {
    const result = await pollUntil(
      async () => {
        try {
          return { value: await assertion() };
        } catch (err) {
          lastError = err;
          return undefined;
        }
      },
      { timeoutMs, intervalMs: options.intervalMs ?? 50, describe: () => options.message ?? 'assertion' },
    );
    return result.value;
  } catch {
    if (lastError instanceof Error) {
      lastError.message = `still failing after ${timeoutMs} ms${options.message ? ` (${options.message})` : ''}: ${lastError.message}`;
    }
    throw lastError;
  }
}

/**
 * True while a process with this pid exists and is not a zombie (signal 0 probes without signalling;
 * /proc tells a zombie, which init may be slow to reap, from a live process).
 */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return process.platform !== 'linux';
  }
}

/** Fails when a service process started by this test process is still running. */
export function expectNoLiveServices(): void {
  const pids = liveChildPids();
  if (pids.length > 0) throw new Error(`service processes still running: ${pids.join(', ')}; close them in afterAll`);
}
