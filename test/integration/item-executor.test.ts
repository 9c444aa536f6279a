/**
 * ItemExecutor with monitorExecution against a real ZooKeeper: each instance is an executor on its
 * own ZkClient (its own session), sharing one namespace. Faults are real: sessions expire because a
 * relay cut the client off for longer than its timeout, answers are lost because the relay drops the
 * connection right after the server applied the request, and a holder dies by closing its session.
 */
import net from 'node:net';
import { LOOPBACK } from '../../src/dev/free-port';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { ErrorCodes } from '../../src/shared/errors';
import type { ExecutionSource } from '../../src/shared/execution-request';
import { defineJob, type ExecutionStatus, type ShardingContext } from '../../src/shared/job-definition';
import { silentLogger } from '../../src/shared/logger';
import { registryPaths as paths } from '../../src/shared/registry-paths';
import type { ZkClient } from '../../src/shared/zk';
import type { ZkRequestCounts } from '../../src/shared/zk/zk-client';
import { ItemExecutor, type ExecutionRecord } from '../../src/worker/item-executor';
import { closeServices, startZooKeeper, waitFor } from '../helpers/services';
import { closeZkClients, connectZk, recordZkEvents, uniqueNamespace } from '../helpers/zk';

const JOB = 'billing';
const MISFIRE = paths.shardingMisfire(JOB, 0);
const FAILOVER = paths.shardingFailover(JOB, 0);
/** ZooKeeper's opcode of a multi request (org.apache.zookeeper.ZooDefs.OpCode.multi). */
const MULTI_OPCODE = 14;

/**
 * Splits one direction of a ZooKeeper connection into its length-prefixed frames. The first frame
 * is the connect handshake; after it, requests start with `xid, type` and answers with `xid`.
 * `onFrame` returns false to stop reading (the connection is being dropped).
 */
function frameReader(onFrame: (frame: Buffer, index: number) => boolean): (chunk: Buffer) => void {
  let buffered = Buffer.alloc(0);
  let index = 0;
  let stopped = false;
  return (chunk) => {
    if (stopped) return;
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= 4) {
      const end = 4 + buffered.readInt32BE(0);
      if (buffered.length < end) return;
      const frame = buffered.subarray(0, end);
      buffered = buffered.subarray(end);
      if (!onFrame(frame, index++)) {
        stopped = true;
        return;
      }
    }
  };
}

/** A TCP relay between one client and the real server, able to cut it at a chosen request. */
interface Link {
  connectionString: string;
  /** True while the link refuses connections. */
  readonly isCut: boolean;
  /** The next multi reaches the server and is applied; its answer is lost with the connection (the client reconnects). */
  loseNextMultiAnswer(): void;
  /** The next multi never reaches the server: the link is cut before it, until {@link heal}. */
  cutAtNextMulti(): void;
  /** Drops every connection and refuses new ones (a partition between this client and ZooKeeper). */
  cut(): void;
  heal(): void;
  close(): Promise<void>;
}

async function startLink(serverPort: number): Promise<Link> {
  const sockets = new Set<net.Socket>();
  let isCut = false;
  let armed: 'lose-answer' | 'cut' | undefined;
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
  };
  const cut = () => {
    isCut = true;
    for (const socket of sockets) socket.destroy();
  };
  const relay = net.createServer((client) => {
    track(client);
    if (isCut) return void client.destroy();
    const upstream = net.connect(serverPort, LOOPBACK);
    track(upstream);
    /** xids of requests whose answer must not reach the client. */
    const lost = new Set<number>();
    client.on(
      'data',
      frameReader((frame, index) => {
        if (index > 0 && frame.length >= 12 && frame.readInt32BE(8) === MULTI_OPCODE && armed) {
          const mode = armed;
          armed = undefined;
          if (mode === 'cut') {
            cut();
            return false;
          }
          lost.add(frame.readInt32BE(4));
        }
        upstream.write(frame);
        return true;
      }),
    );
    upstream.on(
      'data',
      frameReader((frame, index) => {
        if (index > 0 && frame.length >= 8 && lost.has(frame.readInt32BE(4))) {
          client.destroy();
          upstream.destroy();
          return false;
        }
        client.write(frame);
        return true;
      }),
    );
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => relay.listen(0, LOOPBACK, resolve));
  const port = (relay.address() as net.AddressInfo).port;
  return {
    connectionString: `${LOOPBACK}:${port}`,
    get isCut() {
      return isCut;
    },
    loseNextMultiAnswer: () => void (armed = 'lose-answer'),
    cutAtNextMulti: () => void (armed = 'cut'),
    cut,
    heal: () => void (isCut = false),
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        relay.close(() => resolve());
      }),
  };
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** One worker instance: an executor on its own ZooKeeper session. */
interface Instance {
  zk: ZkClient;
  records: ExecutionRecord[];
  abort: AbortController;
  run(fireTime: number, source?: ExecutionSource, options?: { mustRun?: boolean; item?: number }): Promise<ExecutionStatus | 'deferred'>;
  /** `[fireTime, source]` of every execution started, in order (item 0 unless `item`). */
  starts(item?: number): Array<[number, ExecutionSource]>;
}

let server: ZooKeeperServer;
let namespace: string;
/** Reads the registry as an operator would, on a session of its own. */
let admin: ZkClient;
let links: Link[];

beforeAll(async () => {
  server = await startZooKeeper();
});
afterAll(closeServices);

beforeEach(async () => {
  namespace = uniqueNamespace('item-executor');
  links = [];
  admin = await connectZk(server.connectionString, { namespace });
});

afterEach(async () => {
  jest.restoreAllMocks();
  try {
    await closeZkClients();
  } finally {
    await Promise.all(links.map((l) => l.close()));
  }
});

async function link(): Promise<Link> {
  const created = await startLink(server.port);
  links.push(created);
  return created;
}

/**
 * An instance whose handler is `execute`. Sessions last 10 s unless told (the client's heartbeat
 * then stays out of the short request-count windows); `link` puts a relay between it and ZooKeeper.
 */
async function instance(
  instanceId: string,
  execute: (ctx: ShardingContext) => unknown,
  options: { link?: Link; sessionTimeoutMs?: number } = {},
): Promise<Instance> {
  const definition = defineJob({ name: JOB, cron: '0 0 * * * ?', shardingTotalCount: 2, shardingItemParameters: '0=A,1=B', misfire: true, monitorExecution: true, execute });
  const zk = await connectZk(options.link?.connectionString ?? server.connectionString, { namespace, sessionTimeoutMs: options.sessionTimeoutMs ?? 10_000 });
  const records: ExecutionRecord[] = [];
  const abort = new AbortController();
  const executor = new ItemExecutor({
    zk,
    instanceId,
    log: silentLogger,
    config: () => definition.config,
    // As the worker: the session the execution started on, still within reach of the server.
    owns: (sessionId) => zk.sessionId === sessionId && Date.now() < zk.contactDeadline(),
    abortSignal: () => abort.signal,
    record: (r) => records.push(r),
  });
  return {
    zk,
    records,
    abort,
    run: (fireTime, source = 'NORMAL', { mustRun = false, item = 0 } = {}) => executor.run(definition, { job: JOB, item, fireTime, source, epoch: 1 }, { mustRun }),
    starts: (item = 0) => records.filter((r) => r.event === 'start' && r.item === item).map((r) => [r.fireTime, r.source]),
  };
}

/** The item's completed fires as stored in ZooKeeper. */
async function completedList(item = 0): Promise<number[]> {
  const { data } = await admin.get(paths.shardingItem(JOB, item));
  return data.length === 0 ? [] : (JSON.parse(data.toString()) as number[]);
}

/** The session holding the item's `running` node, if any. */
async function runningOwner(item = 0): Promise<string | undefined> {
  return (await admin.exists(paths.shardingRunning(JOB, item)))?.ephemeralOwner;
}

/**
 * The requests `zk` sends from now on, by kind, leaving out the client's own heartbeat reads
 * (`exists('/')`, which the executor never issues). Measured by a pass-through spy.
 */
function countRequests(zk: ZkClient): () => ZkRequestCounts {
  const exists = jest.spyOn(zk, 'exists');
  const before = { ...zk.requestCounts };
  return () => ({
    reads: zk.requestCounts.reads - before.reads - exists.mock.calls.filter(([path]) => path === '/').length,
    writes: zk.requestCounts.writes - before.writes,
    multis: zk.requestCounts.multis - before.multis,
  });
}

describe('ItemExecutor with monitorExecution (real ZooKeeper)', () => {
  it('takes and releases the lock in two multis and reads nothing once its cache is warm', async () => {
    const a = await instance('a', () => undefined);
    await expect(a.run(1000)).resolves.toBe('completed');
    const requests = countRequests(a.zk);
    for (let f = 2000; f <= 10_000; f += 1000) await expect(a.run(f)).resolves.toBe('completed');
    expect(requests()).toEqual({ reads: 0, writes: 0, multis: 18 });
    expect(await completedList()).toEqual([1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10_000]);
    expect(await runningOwner()).toBeUndefined();
  });

  it('gives the handler its context, with taskId and log computed on use', async () => {
    let seen: ShardingContext | undefined;
    const a = await instance('a', (ctx) => void (seen = { ...ctx }));
    await a.run(5000);
    expect(seen).toMatchObject({ jobName: JOB, shardingItem: 0, shardingParameter: 'A', shardingTotalCount: 2, fireTime: 5000, source: 'NORMAL', instanceId: 'a', taskId: `${JOB}@-@5000@-@0@-@a` });
    expect(typeof seen!.log.info).toBe('function');
  });

  it('skips a fire another instance completed, whatever the source, even with a stale cache', async () => {
    const a = await instance('a', () => undefined);
    const b = await instance('b', () => undefined);
    await b.run(1000); // b caches the list at some version
    await a.run(2000); // a completes 2000: b's cache is stale now
    await expect(b.run(2000, 'FAILOVER')).resolves.toBe('skipped');
    await expect(b.run(2000, 'NORMAL')).resolves.toBe('skipped');
    expect(a.starts()).toEqual([[2000, 'NORMAL']]);
    expect(b.starts()).toEqual([[1000, 'NORMAL']]);
    await expect(b.run(3000)).resolves.toBe('completed');
    expect(await completedList()).toEqual([1000, 2000, 3000]);
  });

  it('hands a busy item to its holder as a misfire and consumes the mark with the re-run', async () => {
    const gate = deferred();
    let calls = 0;
    const a = await instance('a', () => (calls++ === 0 ? gate.promise : undefined));
    const b = await instance('b', () => undefined);
    const first = a.run(1000);
    await waitFor(() => a.starts().length === 1, { message: 'a runs fire 1000' });
    await expect(b.run(2000)).resolves.toBe('skipped');
    expect(await admin.getText(MISFIRE)).toBe('2000');
    gate.resolve();
    await expect(first).resolves.toBe('completed');
    expect(a.starts()).toEqual([[1000, 'NORMAL'], [2000, 'MISFIRE']]);
    expect(b.starts()).toEqual([]);
    expect(await admin.exists(MISFIRE)).toBeNull();
    expect(await completedList()).toEqual([1000, 2000]);
  });

  it('closes the race of a holder finishing between the failed create and the mark', async () => {
    const gate = deferred();
    const a = await instance('a', () => gate.promise);
    const b = await instance('b', () => undefined);
    const first = a.run(1000);
    await waitFor(() => a.starts().length === 1, { message: 'a runs fire 1000' });
    let holderDone = false;
    const get = b.zk.get.bind(b.zk);
    // b's first look at the mark (after its create failed): a finishes and releases, without any
    // mark to see, before that read reaches ZooKeeper.
    jest.spyOn(b.zk, 'get').mockImplementation(async (path, watcher) => {
      if (path === MISFIRE && !holderDone) {
        holderDone = true;
        gate.resolve();
        await first;
      }
      return get(path, watcher);
    });
    await expect(b.run(2000)).resolves.toBe('completed');
    expect(holderDone).toBe(true);
    await expect(first).resolves.toBe('completed');
    expect([...a.starts(), ...b.starts()]).toEqual([[1000, 'NORMAL'], [2000, 'NORMAL']]);
    expect(await admin.exists(MISFIRE)).toBeNull();
    expect(await completedList()).toEqual([1000, 2000]);
  });

  it('does not release a lock once its session is gone, and does not record that run', async () => {
    const relay = await link();
    const gate = deferred();
    const a = await instance('a', () => gate.promise, { link: relay, sessionTimeoutMs: 1_000 });
    const first = a.run(1000);
    await waitFor(() => a.starts().length === 1, { message: 'a runs fire 1000' });
    const oldSession = a.zk.sessionId;
    // a is cut off for longer than its session: the server expires it and deletes a's node.
    relay.cut();
    await waitFor(async () => (await runningOwner()) === undefined, { message: "a's session expired by the server" });
    relay.heal();
    await waitFor(() => a.zk.state === 'connected' && a.zk.sessionId !== oldSession, { message: 'a on a new session' });
    // b takes the item (as a failover) and holds it while a's handler finishes.
    const bGate = deferred();
    const b2 = await instance('b2', () => bGate.promise);
    const bHeld = b2.run(1000, 'FAILOVER');
    await waitFor(async () => (await runningOwner()) === b2.zk.sessionId, { message: 'b2 holds the item' });
    gate.resolve();
    await expect(first).resolves.toBe('aborted');
    expect(await runningOwner()).toBe(b2.zk.sessionId);
    expect(await completedList()).toEqual([]);
    bGate.resolve();
    await expect(bHeld).resolves.toBe('completed');
    expect(await completedList()).toEqual([1000]);
    const b = await instance('b', () => undefined);
    await expect(b.run(1000, 'FAILOVER')).resolves.toBe('skipped');
    expect(b.starts()).toEqual([]);
  });

  it('defers a failover request that finds its item running instead of folding it into a misfire', async () => {
    const gate = deferred();
    const a = await instance('a', () => gate.promise);
    const b = await instance('b', () => undefined);
    const first = a.run(1000);
    await waitFor(() => a.starts().length === 1, { message: 'a runs fire 1000' });
    await expect(b.run(900, 'FAILOVER')).resolves.toBe('deferred');
    expect(await admin.exists(MISFIRE)).toBeNull();
    gate.resolve();
    await expect(first).resolves.toBe('completed');
    await expect(b.run(900, 'FAILOVER')).resolves.toBe('completed');
    expect(b.starts()).toEqual([[900, 'FAILOVER']]);
    expect(await admin.exists(FAILOVER)).toBeNull();
    expect(await completedList()).toEqual([1000, 900]);
  });

  it('adopts its own running node when the answer to its lock request was lost', async () => {
    const relay = await link();
    const a = await instance('a', () => undefined, { link: relay });
    const events = recordZkEvents(a.zk);
    const session = a.zk.sessionId;
    relay.loseNextMultiAnswer();
    await expect(a.run(1000)).rejects.toMatchObject({ code: ErrorCodes.ZK_CONNECTION_LOSS });
    // The lock was taken all the same, by our session.
    expect(await runningOwner()).toBe(session);
    // The request is taken again (the worker delays it): the node is ours and nobody runs it.
    await expect(a.run(1000)).resolves.toBe('completed');
    await expect(a.run(2000)).resolves.toBe('completed');
    expect(a.starts()).toEqual([[1000, 'NORMAL'], [2000, 'NORMAL']]);
    expect(events).toEqual(['suspended', 'reconnected']);
    expect(a.zk.sessionId).toBe(session);
    expect(await runningOwner()).toBeUndefined();
    expect(await admin.exists(MISFIRE)).toBeNull();
    expect(await completedList()).toEqual([1000, 2000]);
  });

  it('never adopts a node another execution of this process holds', async () => {
    const gate = deferred();
    const a = await instance('a', () => gate.promise);
    const first = a.run(1000);
    await waitFor(() => a.starts().length === 1, { message: 'a runs fire 1000' });
    await expect(a.run(2000)).resolves.toBe('skipped');
    expect(await admin.getText(MISFIRE)).toBe('2000');
    gate.resolve();
    await expect(first).resolves.toBe('completed');
    expect(a.starts()).toEqual([[1000, 'NORMAL'], [2000, 'MISFIRE']]);
  });

  it('merges the locks and releases of items issued together into one transaction each', async () => {
    const a = await instance('a', () => undefined);
    await Promise.all([a.run(1000, 'NORMAL', { item: 0 }), a.run(1000, 'NORMAL', { item: 1 })]);
    let requests = countRequests(a.zk);
    await expect(Promise.all([a.run(2000, 'NORMAL', { item: 0 }), a.run(2000, 'NORMAL', { item: 1 })])).resolves.toEqual(['completed', 'completed']);
    expect(requests()).toEqual({ reads: 0, writes: 0, multis: 2 });
    // One of the two is busy: the merged lock is refused because of it, and the other is sent again and runs.
    const gate = deferred();
    const b = await instance('b', () => gate.promise);
    const held = b.run(3000, 'NORMAL', { item: 1 });
    await waitFor(() => b.starts(1).length === 1, { message: 'b runs item 1' });
    jest.restoreAllMocks();
    requests = countRequests(a.zk);
    const results = await Promise.all([a.run(3000, 'NORMAL', { item: 0 }), a.run(3000, 'NORMAL', { item: 1 })]);
    expect(results).toEqual(['completed', 'skipped']);
    // The refused merged lock, item 0's lock alone, item 0's release.
    expect(requests().multis).toBe(3);
    gate.resolve();
    await expect(held).resolves.toBe('completed');
    expect(a.starts(0)).toEqual([[1000, 'NORMAL'], [2000, 'NORMAL'], [3000, 'NORMAL']]);
    expect(a.starts(1)).toEqual([[1000, 'NORMAL'], [2000, 'NORMAL']]);
    // a's fire 3000 of item 1 became a misfire mark, which b consumed: 3000 already completed there.
    expect(b.starts(1)).toEqual([[3000, 'NORMAL']]);
    expect(await admin.exists(paths.shardingMisfire(JOB, 1))).toBeNull();
    expect(await completedList(0)).toEqual([1000, 2000, 3000]);
    expect(await completedList(1)).toEqual([1000, 2000, 3000]);
  });

  it('a mark left by a holder that died is found by the next holder, even one whose view was current before', async () => {
    const a = await instance('a', () => undefined);
    const bGate = deferred();
    const b = await instance('b', () => bGate.promise);
    const c = await instance('c', () => undefined);
    await a.run(1000); // a's view: the version a wrote
    const bRun = b.run(2000);
    await waitFor(() => b.starts().length === 1, { message: 'b runs fire 2000' });
    await expect(c.run(3000)).resolves.toBe('skipped'); // marks 3000 and tells the holder
    expect(await admin.getText(MISFIRE)).toBe('3000');
    // b dies holding the item: its session ends with it, and it never reads the mark.
    await b.zk.close();
    expect(await runningOwner()).toBeUndefined();
    bGate.resolve();
    await expect(bRun).resolves.toBe('aborted');
    await expect(a.run(4000)).resolves.toBe('completed');
    expect(a.starts()).toEqual([[1000, 'NORMAL'], [4000, 'NORMAL'], [3000, 'MISFIRE']]);
    expect(await admin.exists(MISFIRE)).toBeNull();
    expect(await completedList()).toEqual([1000, 4000, 3000]);
  });

  it('a re-run that fails keeps its mark, and the next run of the item finds it', async () => {
    const gate = deferred();
    let failNext = false;
    const a = await instance('a', async (ctx) => {
      if (ctx.fireTime === 1000) await gate.promise;
      if (ctx.source === 'MISFIRE' && !failNext) {
        failNext = true;
        throw new Error('boom');
      }
    });
    const b = await instance('b', () => undefined);
    const first = a.run(1000);
    await waitFor(() => a.starts().length === 1, { message: 'a runs fire 1000' });
    await expect(b.run(2000)).resolves.toBe('skipped');
    gate.resolve();
    await expect(first).resolves.toBe('failed');
    expect(await admin.getText(MISFIRE)).toBe('2000');
    await expect(a.run(3000)).resolves.toBe('completed');
    expect(a.starts()).toEqual([[1000, 'NORMAL'], [2000, 'MISFIRE'], [3000, 'NORMAL'], [2000, 'MISFIRE']]);
    expect(await admin.exists(MISFIRE)).toBeNull();
    expect(await completedList()).toEqual([1000, 3000, 2000]);
  });

  it('reports a run whose completion could not be recorded as aborted, not completed', async () => {
    const relay = await link();
    // The handler returns while a still owns the item; the release that follows never reaches
    // ZooKeeper, and a stays cut off until the server expired its session.
    const a = await instance('a', () => relay.cutAtNextMulti(), { link: relay, sessionTimeoutMs: 1_000 });
    const result = a.run(1000);
    await waitFor(() => relay.isCut, { message: 'the release multi was cut' });
    await waitFor(async () => (await runningOwner()) === undefined, { message: "a's session expired by the server" });
    relay.heal();
    await expect(result).resolves.toBe('aborted');
    expect(a.records.find((r) => r.event === 'finish')).toMatchObject({ status: 'aborted', reason: expect.stringContaining('could not be recorded') });
    expect(await completedList()).toEqual([]);
    const b = await instance('b', () => undefined);
    await expect(b.run(1000, 'FAILOVER')).resolves.toBe('completed');
    expect(await completedList()).toEqual([1000]);
  });

  it('finds out whether a release whose answer was lost went through, without deleting anything', async () => {
    const relay = await link();
    let lose = true;
    const a = await instance(
      'a',
      () => {
        // The release that follows is applied by the server; its answer is lost with the connection.
        if (lose) relay.loseNextMultiAnswer();
        lose = false;
      },
      { link: relay },
    );
    const events = recordZkEvents(a.zk);
    const session = a.zk.sessionId;
    await expect(a.run(1000)).resolves.toBe('completed');
    expect(events).toEqual(['suspended', 'reconnected']);
    await expect(a.run(2000)).resolves.toBe('completed');
    expect(a.zk.sessionId).toBe(session);
    expect(await completedList()).toEqual([1000, 2000]);
    expect(await runningOwner()).toBeUndefined();
    expect(a.starts()).toEqual([[1000, 'NORMAL'], [2000, 'NORMAL']]);
  });

  it("aborts the handler's signal when the worker stops its executions", async () => {
    let seen: AbortSignal | undefined;
    const a = await instance('a', (ctx) => {
      seen = ctx.signal;
      return new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
    });
    const running = a.run(1000);
    await waitFor(() => seen !== undefined, { message: 'handler started' });
    expect(seen?.aborted).toBe(false);
    a.abort.abort(new Error('stop'));
    await expect(running).resolves.toBe('aborted');
    expect(seen?.aborted).toBe(true);
    expect(await runningOwner()).toBeUndefined();
    expect(await completedList()).toEqual([]);
  });
});
