import net from 'node:net';
import { Redis } from 'ioredis';
import zookeeper from 'node-zookeeper-client';
import { liveChildPids, tcpExchange } from '../../src/dev/child-service';
import { findRedisServer, RedisServer } from '../../src/dev/redis-server';
import { findZooKeeper, ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { ErrorCodes } from '../../src/shared/errors';
import { installHandshakeTimeout } from '../../src/shared/zk/driver/handshake-timeout';
import {
  closeServices,
  eventually,
  expectNoLiveServices,
  isProcessAlive,
  startRedis,
  startZooKeeper,
  startZooKeeperEnsemble,
  waitFor,
} from '../helpers/services';

/**
 * A connected node-zookeeper-client with promise helpers; closed by the test. The session outlives
 * two JVM restarts on a loaded machine: with 10 s, a clean-clone CI run's restarts took longer, the
 * session expired, and a read held by the library was never answered (the test hit its timeout).
 */
async function connectZk(connectionString: string): Promise<zookeeper.Client> {
  const client = zookeeper.createClient(connectionString, { sessionTimeout: 30_000, spinDelay: 100, retries: 0 });
  // As shardcron's own client: a handshake the restarting server never answers (ZooKeeper 3.8.0,
  // while it loads its database) is dropped after 10 s and tried again; the plain library waited
  // for it forever (1 of 8 kill -9 and restart cycles under load, and this test in CI).
  installHandshakeTimeout(client);
  const connected = new Promise<void>((resolve) => client.once('connected', resolve));
  client.connect();
  await connected;
  return client;
}

function zkCreate(client: zookeeper.Client, path: string, data: string): Promise<string> {
  return new Promise((resolve, reject) =>
    client.create(path, Buffer.from(data), zookeeper.CreateMode.PERSISTENT, (err, created) =>
      err ? reject(err) : resolve(created),
    ),
  );
}

/** A read, failing after `timeoutMs` if unanswered (so that `eventually` tries again instead of waiting for good). */
function zkGet(client: zookeeper.Client, path: string, timeoutMs = 5_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer to getData ${path} within ${timeoutMs} ms`)), timeoutMs);
    client.getData(path, (err, data) => {
      clearTimeout(timer);
      if (err) reject(err);
      else resolve(data.toString());
    });
  });
}

const zkClients: zookeeper.Client[] = [];
const redisClients: Redis[] = [];

afterEach(() => {
  for (const client of zkClients.splice(0)) client.close();
  for (const client of redisClients.splice(0)) client.disconnect();
});
afterAll(async () => {
  await closeServices();
  expectNoLiveServices();
});

/**
 * Explicit per-test budgets; a JVM start is ~0.5 s here, an ensemble ~2 s. The first JVM start on a
 * machine that just installed ZooKeeper (cold file cache, as in CI) took the first test past 30 s once.
 */
const ZK_TEST_TIMEOUT_MS = 60_000;
const ENSEMBLE_TEST_TIMEOUT_MS = 45_000;

describe('ZooKeeperServer', () => {
  it('starts, keeps its data across stop/restart and kill/restart, and leaves no process after close', async () => {
    const zk = await startZooKeeper();
    try {
      expect(zk.connectionString).toBe(`127.0.0.1:${zk.port}`);
      expect(await tcpExchange(zk.port, 'ruok')).toBe('imok');
      const pid = zk.pid as number;

      const before = await connectZk(zk.connectionString);
      zkClients.push(before);
      await zkCreate(before, '/survives', 'hello');

      await zk.stop();
      expect(zk.running).toBe(false);
      expect(isProcessAlive(pid)).toBe(false);
      await expect(tcpExchange(zk.port, 'ruok')).rejects.toThrow();

      await zk.restart();
      expect(zk.running).toBe(true);
      const after = await connectZk(zk.connectionString);
      zkClients.push(after);
      expect(await zkGet(after, '/survives')).toBe('hello');

      await zk.kill();
      await zk.restart();
      // The first client reconnects on its own; its session outlived the restarts.
      expect(await eventually(() => zkGet(before, '/survives'), { timeoutMs: 30_000 })).toBe('hello');

      const lastPid = zk.pid as number;
      await zk.close();
      await zk.close(); // idempotent
      expect(zk.running).toBe(false);
      expect(isProcessAlive(lastPid)).toBe(false);
      await expect(zk.restart()).rejects.toMatchObject({ code: ErrorCodes.CLOSED });
    } finally {
      // A failure above must not leave the JVM to the next test's check that no process is left.
      await zk.close();
    }
  }, ZK_TEST_TIMEOUT_MS);

  it('fails with SERVICE_START_FAILED and kills the JVM when it does not answer in time', async () => {
    const error = await ZooKeeperServer.start({ startTimeoutMs: 1 }).then(() => undefined, (err: unknown) => err);
    expect(error).toMatchObject({ code: ErrorCodes.SERVICE_START_FAILED });
    expect((error as Error).message).toMatch(/^zookeeper on 127\.0\.0\.1:\d+ failed to start: it did not answer within 1 ms/);
    expect(liveChildPids()).toEqual([]);
  }, ZK_TEST_TIMEOUT_MS);
});

describe('RedisServer', () => {
  it('answers PING, restarts empty after a kill, and leaves no process after close', async () => {
    const redis = await startRedis();
    expect(redis.url).toBe(`redis://127.0.0.1:${redis.port}`);
    const client = new Redis(redis.url, { maxRetriesPerRequest: null, retryStrategy: () => 50 });
    redisClients.push(client);
    expect(await client.ping()).toBe('PONG');
    await client.set('k', 'v');

    const pid = redis.pid as number;
    await redis.kill();
    expect(redis.running).toBe(false);
    expect(isProcessAlive(pid)).toBe(false);

    await redis.restart();
    expect(await client.ping()).toBe('PONG');
    expect(await client.get('k')).toBeNull(); // no persistence, by design

    await redis.stop();
    await redis.restart();
    expect(await client.ping()).toBe('PONG');

    const lastPid = redis.pid as number;
    await Promise.all([redis.close(), redis.close()]);
    expect(isProcessAlive(lastPid)).toBe(false);
  }, ZK_TEST_TIMEOUT_MS);

  it('fails with SERVICE_START_FAILED naming the port and the server output when the port is taken', async () => {
    const blocker = net.createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
        const error = await RedisServer.start({ port }).then(() => undefined, (err: unknown) => err);
        expect(error).toMatchObject({ code: ErrorCodes.SERVICE_START_FAILED });
        expect((error as Error).message).toContain(`127.0.0.1:${port}`);
        expect((error as Error).message).toMatch(/address already in use/i);
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  });
});

describe('ZooKeeperEnsemble', () => {
  it('elects one leader, and a client keeps reading and writing after the leader is stopped', async () => {
    const ensemble = await startZooKeeperEnsemble({ size: 3 });
    expect(ensemble.connectionString.split(',')).toEqual(ensemble.members.map((m) => `127.0.0.1:${m.clientPort}`));
    const modes = await Promise.all(ensemble.members.map((m) => ensemble.mode(m.id)));
    expect(modes.filter((mode) => mode === 'leader')).toHaveLength(1);
    expect(modes.filter((mode) => mode === 'follower')).toHaveLength(2);

    const client = await connectZk(ensemble.connectionString);
    zkClients.push(client);
    await zkCreate(client, '/before', 'one');

    const leader = ensemble.members[modes.indexOf('leader')];
    await leader.stop();
    expect(await ensemble.mode(leader.id)).toBe('down');
    const survivors = ensemble.members.filter((m) => m !== leader);
    const survivorModes = async () => (await Promise.all(survivors.map((m) => ensemble.mode(m.id)))).sort().join();
    await waitFor(async () => (await survivorModes()) === 'follower,leader', {
      timeoutMs: 20_000,
      message: 'the two remaining members elect a new leader',
    });
    expect(await eventually(() => zkGet(client, '/before'), { timeoutMs: 15_000 })).toBe('one');
    await eventually(() => zkCreate(client, '/after', 'two'), { timeoutMs: 15_000 });
    expect(await zkGet(client, '/after')).toBe('two');

    await leader.restart();
    expect(['leader', 'follower']).toContain(await ensemble.mode(leader.id));

    const pids = ensemble.members.map((m) => m.pid as number);
    await ensemble.close();
    await ensemble.close();
    expect(pids.filter(isProcessAlive)).toEqual([]);
  }, ENSEMBLE_TEST_TIMEOUT_MS);
});

describe('missing binaries', () => {
  it('names the missing ZooKeeper/java and the install command', async () => {
    const env = { PATH: '', SHARDCRON_JAVA: '/nonexistent/java', SHARDCRON_ZK_CLASSPATH: '/nonexistent/zookeeper.jar' };
    expect(() => findZooKeeper(env)).toThrow(
      expect.objectContaining({
        code: ErrorCodes.MISSING_DEPENDENCY,
        message: expect.stringContaining('apt-get update && apt-get install -y zookeeper'),
      }),
    );
    const error = await ZooKeeperServer.start({ env }).then(() => undefined, (err: unknown) => err);
    expect((error as Error).message).toContain('SHARDCRON_JAVA=/nonexistent/java is not an executable file');
    expect((error as Error).message).toContain('SHARDCRON_ZK_CLASSPATH entry /nonexistent/zookeeper.jar does not exist');
    expect((error as Error).message).toContain('Java 17');
  });

  it('names the missing redis-server and the install command', async () => {
    expect(() => findRedisServer({ PATH: '/nonexistent' })).toThrow(/no redis-server executable on PATH.*apt-get install -y redis-server/);
    await expect(RedisServer.start({ env: { SHARDCRON_REDIS_SERVER: '/nonexistent/redis-server' } })).rejects.toMatchObject({
      code: ErrorCodes.MISSING_DEPENDENCY,
      message: expect.stringContaining('SHARDCRON_REDIS_SERVER=/nonexistent/redis-server is not an executable file'),
    });
  });
});

describe('waitFor', () => {
  it('returns the first truthy value and times out with the given message', async () => {
    let calls = 0;
    expect(await waitFor(() => ++calls >= 3 && calls, { intervalMs: 5 })).toBe(3);
    await expect(waitFor(() => false, { timeoutMs: 100, message: 'never true' })).rejects.toThrow(
      'waitFor timed out after 100 ms: never true',
    );
  });
});
