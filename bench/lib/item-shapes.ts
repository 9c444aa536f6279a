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
  /** The lock and release transactions of one item, given the item node's version; an empty lock is none. */
  lock(slot: number, version: number): ZkOp[];
  release(slot: number, version: number): ZkOp[];
}

const item = (slot: number) => `/bench/items/${slot}`;
const running = (slot: number) => `/bench/items/${slot}/running`;
/** About the size of an item's completed fires (32 fires a second apart, difference-encoded). */
const DONE = Buffer.from(JSON.stringify(['d', 1_763_776_800_000, ...Array(31).fill(1000)]));
/** Items in flight: a worker's prefetch in the throughput scenario (concurrency 100 + prefetch 1,000). */
const WINDOW = 1_100;
/** How long ZooKeeper's CPU is still counted after a pass ends (its idle CPU in that time counts too). */
const SETTLE_MS = 2_000;

const ITEM_SHAPES: readonly Shape[] = [
  {
    name: 'lock: create running + check item; release: set item + delete running (monitorExecution now)',
    lock: (s, v) => [{ type: 'create', path: running(s), data: 'i', mode: 'ephemeral' }, { type: 'check', path: item(s), version: v }],
    release: (s) => [{ type: 'set', path: item(s), data: DONE, version: -1 }, { type: 'delete', path: running(s), version: -1 }],
  },
  {
    name: 'lock: create running; release: delete running (the exclusion alone)',
    lock: (s) => [{ type: 'create', path: running(s), data: 'i', mode: 'ephemeral' }],
    release: (s) => [{ type: 'delete', path: running(s), version: -1 }],
  },
  {
    name: 'lock: set item (version); release: set item (version)',
    lock: (s, v) => [{ type: 'set', path: item(s), data: DONE, version: v }],
    release: (s, v) => [{ type: 'set', path: item(s), data: DONE, version: v }],
  },
  {
    name: 'release only: set item',
    lock: () => [],
    release: (s) => [{ type: 'set', path: item(s), data: DONE, version: -1 }],
  },
];

/**
 * One pass of `items` items through `shape`, {@link WINDOW} of them in flight, one item node per
 * place in the window; `versions` holds each node's version, kept current across passes.
 */
async function measureItemShape(zk: ZkClient, zkPid: number, shape: Shape, items: number, versions: number[]): Promise<ItemShapeResult> {
  const batcher = new MultiBatcher();
  const session = zk.onSession(zk.sessionId);
  // Every shape's first operation is the one that may change the item node (a set; a create or a check does not).
  const commit = async (ops: ZkOp[], s: number) => {
    const { stat } = (await batcher.commit(session, ops)).results[0];
    if (stat) versions[s] = stat.version;
  };
  let next = 0;
  const place = async (s: number) => {
    while (next < items) {
      next += 1;
      const lock = shape.lock(s, versions[s]);
      if (lock.length > 0) await commit(lock, s);
      await commit(shape.release(s, versions[s]), s);
    }
  };
  const zkBefore = procSample(zkPid).cpuSeconds;
  const cpuBefore = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: WINDOW }, (_, s) => place(s)));
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  // ZooKeeper goes on working for a while after a pass: that work is the pass's too. Passes back to
  // back measured the ephemeral creates and deletes twice as costly as with a pause between passes.
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  const zkCpu = procSample(zkPid).cpuSeconds - zkBefore;
  return {
    shape: shape.name,
    opsPerItem: shape.lock(0, 0).length + shape.release(0, 0).length,
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
  const versions: number[] = [];
  for (let s = 0; s < WINDOW; s += 1) {
    await zk.ensurePath(item(s));
    versions.push((await zk.exists(item(s)))!.version);
  }
  for (const shape of ITEM_SHAPES) await measureItemShape(zk, zkPid, shape, 5_000, versions);
  const passes = ITEM_SHAPES.map((): ItemShapeResult[] => []);
  for (let r = 0; r < rounds; r += 1) {
    for (const [i, shape] of ITEM_SHAPES.entries()) passes[i].push(await measureItemShape(zk, zkPid, shape, items, versions));
  }
  return passes.map((list) => [...list].sort((a, b) => a.itemsPerSecond - b.itemsPerSecond)[Math.floor(list.length / 2)]);
}
