/**
 * How many Sentinel clients of one process end for good across a kill -9 of the primary:
 * `BUSY=3 N=400 ROUNDS=3 npx tsx bench/tools/sentinel-clients.ts`. No shardcron node runs: N clients made
 * by `createRedisClient` (the Sentinel client every shardcron process uses) each send a PING every
 * 20 ms; the primary is killed, the promotion awaited, and 5 s later each client's status counted.
 * `CONNECTOR=ioredis` gives the same clients ioredis's own SentinelConnector, to compare;
 * `CONNECTOR=no-detector` also turns the failover detector off. `BUSY=3` runs three processes
 * spinning on the CPUs through each round: a loaded machine, where asking a Sentinel takes longer.
 *
 * Why: ioredis 6.0.0 ends a client (status `end`, every command failing with "Connection is closed.")
 * when the promotion is announced while it is asking the Sentinels for the primary; the more clients
 * a process has, the slower each ask, the more of them end (docs/design-notes.md, "Sentinel clients
 * through a promotion").
 */
import { spawn } from 'node:child_process';
import { SentinelConnector, type Redis, type SentinelConnectionOptions } from 'ioredis';
import { RedisSentinelGroup } from '../../src/dev/redis-sentinel';
import { createRedisClient, type RedisClient } from '../../src/shared/redis/redis-connection';
import { sleep } from '../lib/stats';

const N = Number(process.env.N ?? 400);
const ROUNDS = Number(process.env.ROUNDS ?? 2);
const CONNECTOR = process.env.CONNECTOR ?? 'shardcron';
const BUSY = Number(process.env.BUSY ?? 0);

function client(group: RedisSentinelGroup): RedisClient {
  const target = { url: `redis://${group.name}`, sentinel: { sentinels: group.sentinelAddresses, name: group.name } };
  if (CONNECTOR === 'shardcron') return createRedisClient(target);
  // The client createRedisClient makes, with ioredis's own connector put back before it connects
  // (and, for no-detector, without the failover detector).
  const c = createRedisClient(target, { lazyConnect: true }) as Redis;
  if (CONNECTOR === 'no-detector') c.options.failoverDetector = false;
  (c as unknown as { connector: SentinelConnector }).connector = new SentinelConnector(c.options as SentinelConnectionOptions);
  return c;
}

async function round(index: number): Promise<void> {
  const group = await RedisSentinelGroup.start();
  const clients = Array.from({ length: N }, () => client(group));
  const spinning = Array.from({ length: BUSY }, () => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
  let stop = false;
  try {
    await Promise.all(clients.map((c) => c.ping()));
    const pinging = clients.map(async (c) => {
      while (!stop) {
        await c.ping().catch(() => undefined);
        await sleep(20);
      }
    });
    const primary = (await group.primary())!;
    const killedAt = Date.now();
    await primary.kill();
    await group.waitForPromotion(primary, 30_000);
    const promotionMs = Date.now() - killedAt;
    await sleep(5_000);
    const statuses: Record<string, number> = {};
    for (const c of clients) statuses[(c as Redis).status] = (statuses[(c as Redis).status] ?? 0) + 1;
    stop = true;
    await Promise.all(pinging);
    process.stdout.write(`${JSON.stringify({ round: index, connector: CONNECTOR, clients: N, busy: BUSY, promotionMs, statusesFiveSecondsAfter: statuses })}\n`);
  } finally {
    stop = true;
    for (const p of spinning) p.kill('SIGKILL');
    for (const c of clients) c.disconnect();
    await group.close();
  }
}

async function main(): Promise<void> {
  if (!['shardcron', 'ioredis', 'no-detector'].includes(CONNECTOR)) throw new Error(`CONNECTOR must be shardcron, ioredis or no-detector, got ${CONNECTOR}`);
  if (!Number.isInteger(BUSY) || BUSY < 0) throw new Error(`BUSY must be a whole number, got ${process.env.BUSY}`);
  if (!Number.isInteger(N) || N < 1) throw new Error(`N must be a positive whole number, got ${process.env.N}`);
  for (let i = 1; i <= ROUNDS; i++) await round(i);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
