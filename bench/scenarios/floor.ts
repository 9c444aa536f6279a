/**
 * Scenario 6, the floor: what one ZooKeeper write and one Redis round trip cost on this machine,
 * measured sequentially (one request in flight) with the same client libraries shardcron uses; and
 * what ZooKeeper work per item costs in bulk, for the layout monitorExecution uses and for layouts
 * with fewer operations per item (`item-shapes.ts`).
 */
import IORedis from 'ioredis';
import type { BenchContext } from '../lib/context';
import { measureItemShapes, type ItemShapeResult } from '../lib/item-shapes';
import { benchZkClient, startServices } from '../lib/services';
import { summarize, type Summary } from '../lib/stats';

export interface FloorResult {
  samples: number;
  zkSetData: Summary;
  zkMulti1: Summary;
  /** check + setData, the shape of a leader's fenced multi with one ledger. */
  zkFencedMulti: Summary;
  zkGetData: Summary;
  redisPing: Summary;
  /** Items through each transaction shape, 1,100 in flight, merged per turn as a worker does (median of the passes). */
  itemShapes?: ItemShapeResult[];
}

async function time(n: number, op: () => Promise<unknown>): Promise<Summary> {
  for (let i = 0; i < Math.min(200, n); i += 1) await op(); // warm up JIT and connections
  const out: number[] = [];
  for (let i = 0; i < n; i += 1) {
    const t = performance.now();
    await op();
    out.push(performance.now() - t);
  }
  return summarize(out);
}

export async function runFloor(ctx: BenchContext): Promise<FloorResult> {
  const n = ctx.mode === 'quick' ? 2_000 : 10_000;
  const services = await startServices(2_000);
  const zk = await benchZkClient(services.zk.connectionString, ctx.unique('floor'));
  const redis = new IORedis(services.redis.url, { maxRetriesPerRequest: null });
  try {
    await zk.ensurePath('/bench/node');
    await zk.ensurePath('/bench/fence');
    const fence = await zk.exists('/bench/fence');
    const value = Buffer.alloc(200, 'x'); // about the size of a one-instance ledger
    ctx.log(`floor: ${n} sequential ops each`);
    const sequential = {
      samples: n,
      zkSetData: await time(n, () => zk.set('/bench/node', value)),
      zkMulti1: await time(n, () => zk.multi().set('/bench/node', value).commit()),
      zkFencedMulti: await time(n, () => zk.fencedMulti({ path: '/bench/fence', version: fence!.version }).set('/bench/node', value).commit()),
      zkGetData: await time(n, () => zk.get('/bench/node')),
      redisPing: await time(n, () => redis.ping()),
    };
    const items = ctx.mode === 'quick' ? 20_000 : 60_000;
    ctx.log(`floor: ${items} items through each transaction shape, 3 passes`);
    return { ...sequential, itemShapes: await measureItemShapes(zk, services.zk.pid!, items, 3) };
  } finally {
    redis.disconnect();
    await zk.close();
    await services.close();
  }
}
