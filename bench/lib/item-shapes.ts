/**
 * What ZooKeeper work per item costs when items flow as through a busy worker: a window of items in
 * flight, each a lock transaction then a release transaction, merged per event-loop turn by the
 * worker's own MultiBatcher. Compares the layout shardcron uses with monitorExecution against
 * layouts with fewer operations per item, to tell how far each is from the no-op floor.
 */
import type { ZkClient, ZkOp } from '../../src/shared/zk';
import { MultiBatcher } from '../../src/worker/multi-batcher';
import { procSample } from '../lib/services';

export interface ItemShapeResult {
  shape: string;
  opsPerItem: number;
  itemsPerSecond: number;
  /** CPU of the ZooKeeper server and of this (client) process, microseconds per item. */
  zkServerUsPerItem: number;
  clientUsPerItem: number;
}

interface Shape {
  name: string;
  ops: number;
  /** The lock and release transactions of one item, given the item node's version; null: none. */
  lock(slot: number, version: number): ZkOp[] | null;
  release(slot: number, version: number): ZkOp[];
}

const item = (slot: number) => `/bench/items/${slot}`;
const running = (slot: number) => `/bench/items/${slot}/running`;
/** About the size of an item's completed fires (32 fires a second apart, difference-encoded). */
const DONE = Buffer.from(JSON.stringify(['d', 1_763_776_800_000, ...Array(31).fill(1000)]));

export const ITEM_SHAPES: readonly Shape[] = [
  {
    name: 'lock: create running + check item; release: set item + delete running (monitorExecution now)',
    ops: 4,
    lock: (s, v) => [{ type: 'create', path: running(s), data: 'i', mode: 'ephemeral' }, { type: 'check', path: item(s), version: v }],
    release: (s) => [{ type: 'set', path: item(s), data: DONE, version: -1 }, { type: 'delete', path: running(s), version: -1 }],
  },
  {
    name: 'lock: create running; release: delete running (the exclusion alone)',
    ops: 2,
    lock: (s) => [{ type: 'create', path: running(s), data: 'i', mode: 'ephemeral' }],
    release: (s) => [{ type: 'delete', path: running(s), version: -1 }],
  },
  {
    name: 'lock: set item (version); release: set item (version)',
    ops: 2,
    lock: (s, v) => [{ type: 'set', path: item(s), data: DONE, version: v }],
    release: (s, v) => [{ type: 'set', path: item(s), data: DONE, version: v }],
  },
  {
    name: 'release only: set item',
    ops: 1,
    lock: () => null,
    release: (s) => [{ type: 'set', path: item(s), data: DONE, version: -1 }],
  },
];

/** One pass of `items` items through `shape`, `window` of them in flight (a worker's prefetch). */
export async function measureItemShape(zk: ZkClient, zkPid: number, shape: Shape, items: number, window: number): Promise<ItemShapeResult> {
  await zk.ensurePath('/bench/items');
  const versions: number[] = [];
  for (let s = 0; s < window; s += 1) {
    await zk.ensurePath(item(s));
    versions.push((await zk.exists(item(s)))!.version);
  }
  const batcher = new MultiBatcher();
  const session = zk.onSession(zk.sessionId);
  const version = (results: { stat?: { version: number } }[], at: number, s: number) => {
    const stat = results[at]?.stat;
    if (stat) versions[s] = stat.version;
  };
  let next = 0;
  const slotLoop = async (s: number) => {
    while (next < items) {
      next += 1;
      const lock = shape.lock(s, versions[s]);
      if (lock) version((await batcher.commit(session, lock)).results, 0, s);
      version((await batcher.commit(session, shape.release(s, versions[s]))).results, 0, s);
    }
  };
  const zkBefore = procSample(zkPid).cpuSeconds;
  const cpuBefore = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: window }, (_, s) => slotLoop(s)));
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const zkCpu = procSample(zkPid).cpuSeconds - zkBefore;
  return {
    shape: shape.name,
    opsPerItem: shape.ops,
    itemsPerSecond: Math.round(items / seconds),
    zkServerUsPerItem: Math.round((zkCpu * 1e6) / items),
    clientUsPerItem: Math.round((cpu.user + cpu.system) / items),
  };
}

/**
 * Every shape once with a few items to warm the JIT of both sides, then `rounds` passes of each,
 * shapes alternating; per shape the pass with the median items per second.
 */
export async function measureItemShapes(zk: ZkClient, zkPid: number, items: number, rounds: number): Promise<ItemShapeResult[]> {
  const window = 1_100; // the worker's prefetch in the throughput scenario
  for (const shape of ITEM_SHAPES) await measureItemShape(zk, zkPid, shape, 5_000, window);
  const passes = ITEM_SHAPES.map((): ItemShapeResult[] => []);
  for (let r = 0; r < rounds; r += 1) {
    for (const [i, shape] of ITEM_SHAPES.entries()) passes[i].push(await measureItemShape(zk, zkPid, shape, items, window));
  }
  return passes.map((list) => [...list].sort((a, b) => a.itemsPerSecond - b.itemsPerSecond)[Math.floor(list.length / 2)]);
}
