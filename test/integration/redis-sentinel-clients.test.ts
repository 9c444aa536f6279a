/**
 * The Sentinel clients every node makes (createRedisClient) through a promotion, without a cluster
 * around them: many clients of one process reconnecting at once, and a primary that hangs instead of
 * dying. Each test has its own Sentinel group, since each one promotes.
 */
import type { Redis } from 'ioredis';
import type { RedisServer } from '../../src/dev/redis-server';
import type { RedisSentinelGroup } from '../../src/dev/redis-sentinel';
import { within } from '../../src/shared/concurrency';
import { createRedisClient, type RedisClient } from '../../src/shared/redis/redis-connection';
import type { RedisNode, RedisTarget } from '../../src/shared/redis/redis-target';
import { startRoundTripRelay, type RoundTripRelay } from '../helpers/round-trip-relay';
import { closeServices, startRedisSentinels, waitFor } from '../helpers/services';

jest.setTimeout(60_000);

let clients: RedisClient[] = [];
let relays: RoundTripRelay[] = [];
let paused: RedisServer | undefined;

afterEach(async () => {
  for (const c of clients.splice(0)) c.disconnect();
  try {
    if (paused?.pid !== undefined) process.kill(paused.pid, 'SIGCONT');
  } catch {
    // gone already
  }
  paused = undefined;
  await Promise.all(relays.splice(0).map((r) => r.close()));
  await closeServices();
});

const sentinelTarget = (group: RedisSentinelGroup, sentinels: RedisNode[] = group.sentinelAddresses): RedisTarget => ({ url: `redis://${group.name}`, sentinel: { sentinels, name: group.name } });

/**
 * Each client's role as its server tells it, or why it could not: `master` once it follows the
 * promotion. Bounded: a client waiting to reconnect never answers.
 */
const roles = () =>
  Promise.all(
    clients.map((c) =>
      within((c as Redis).info('replication'), 2_000).then(
        (info) => (info === undefined ? `${(c as Redis).status}: no answer to INFO within 2000 ms` : /role:(\w+)/.exec(info)?.[1]),
        (err: Error) => `${(c as Redis).status}: ${err.message}`,
      ),
    ),
  );

it('a promotion announced while clients are asking the Sentinels for the primary ends none of them', async () => {
  const group = await startRedisSentinels();
  // The clients know the Sentinels through relays, and learn their direct addresses from them (as
  // ioredis does): their failover detectors hear the promotion directly, while asking through a
  // relay can be made to wait.
  relays = await Promise.all(group.sentinels.map((s) => startRoundTripRelay(s.port)));
  const target = sentinelTarget(group, relays.map((r) => ({ host: '127.0.0.1', port: r.port })));
  clients = Array.from({ length: 5 }, () => createRedisClient(target));
  await Promise.all(clients.map((c) => c.ping()));

  // Kill the primary and hold the relays' answers: every client's reconnect is asking (held) when the
  // Sentinels announce the promotion; then let the answers through.
  const primary = (await group.primary())!;
  const asked = relays[0].roundTrips();
  for (const r of relays) r.holdAnswers();
  await primary.kill();
  // A reconnect asks the first Sentinel of its list, the first relay.
  await waitFor(() => relays[0].roundTrips() >= asked + clients.length && clients.every((c) => (c as Redis).status === 'connecting'), { timeoutMs: 5_000, message: 'every client asking a Sentinel' });
  await group.waitForPromotion(primary, 30_000);
  await new Promise((resolve) => setTimeout(resolve, 500));
  for (const r of relays) r.releaseAnswers();

  await waitFor(async () => (await roles()).every((role) => role === 'master'), { timeoutMs: 15_000, intervalMs: 250, message: 'every client on the promoted primary' }).catch(async (err: Error) => {
    throw new Error(`${err.message}: ${JSON.stringify(await roles())}`);
  });
});

it('a primary that hangs: the failover detector moves every client to the promoted replica', async () => {
  const group = await startRedisSentinels();
  clients = Array.from({ length: 3 }, () => createRedisClient(sentinelTarget(group)));
  await Promise.all(clients.map((c) => c.set('before', '1')));

  // SIGSTOP: the connections stay open and nothing answers on them. Without the detector a command
  // sent on them waits until TCP gives up, minutes from now.
  paused = (await group.primary())!;
  process.kill(paused.pid!, 'SIGSTOP');
  const writes = clients.map((c, i) => c.set(`during-${i}`, '1').then(() => Date.now()));
  const promoted = await group.waitForPromotion(paused, 30_000);
  const promotedAt = Date.now();
  const written = await within(Promise.all(writes), 10_000);
  if (written === undefined) throw new Error('the writes sent to the hung primary got no answer within 10 s');
  process.stdout.write(`hung primary: writes went through ${written.map((t) => t - promotedAt).join(', ')} ms after the promotion was seen\n`);
  // ioredis waits 2 s for the hung connection to close; the client drops it after FAILOVER_DISCONNECT_MS.
  expect(Math.max(...written) - promotedAt).toBeLessThan(1_500);
  expect(await roles()).toEqual(clients.map(() => 'master'));
  const direct = createRedisClient({ url: promoted.url });
  try {
    expect(await Promise.all(clients.map((_, i) => direct.get(`during-${i}`)))).toEqual(clients.map(() => '1'));
  } finally {
    direct.disconnect();
  }
});
