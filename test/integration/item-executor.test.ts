/**
 * ItemExecutor with monitorExecution against a real ZooKeeper: each instance is an executor on its
 * own ZkClient (its own session), sharing one namespace. Faults are real: sessions expire because a
 * relay cut the client off for longer than its timeout, answers are lost because the relay drops the
 * connection right after the server applied the request, requests are held back by the relay to
 * force an interleaving, and a holder dies by closing its session.
 *
 * The protocol under test, per item: the lock is the ephemeral `sharding/{i}/running` node, created
 * on a session-bound handle with a read of `sharding/{i}` (the completed fires) right behind it; the
 * release is one session-bound multi (record the fire, delete `running`, delete the consumed
 * `misfire` mark) with a read of the mark right behind it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import type { ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { Semaphore } from '../../src/shared/concurrency';
import { ErrorCodes } from '../../src/shared/errors';
import type { ExecutionSource } from '../../src/shared/registry/execution-request';
import { defineJob, type ExecutionStatus, type ShardingContext } from '../../src/shared/config/job-definition';
import { registryPaths as paths } from '../../src/shared/registry/registry-paths';
import type { ZkClient } from '../../src/shared/zk';
import { ItemExecutor, type EarlyLock, type ExecutionEvent } from '../../src/worker/item-executor';
import { closeServices, startZooKeeper, waitFor } from '../helpers/services';
import { closeZkClients, connectZk, recordZkEvents, uniqueNamespace } from '../helpers/zk';
import { OP, startLink, type Link } from '../helpers/zk-relay';
import { parseCompletedFires } from '../../src/shared/registry/completed-fires';
import { deferred } from '../helpers/deferred';
import { NOT_OWNED_AT_START } from '../../src/worker/handler-call';

const JOB = 'billing';
const ITEM = paths.shardingItem(JOB, 0);
const RUNNING = paths.shardingRunning(JOB, 0);
const MISFIRE = paths.shardingMisfire(JOB, 0);
const FAILOVER = paths.shardingFailover(JOB, 0);

/** What the executor logs when it takes over a running node of its own session that none of its executions holds. */
const ADOPTED = 'taking over our own orphaned running node';
/** What it logs when a release multi failed other than by session expiry (and it checks the node itself). */
const RELEASE_FAILED = 'could not release the item with its completion; releasing the item only';


/** One worker instance: an executor on its own ZooKeeper session. */
interface Instance {
  zk: ZkClient;
  records: ExecutionEvent[];
  /** Messages the executor logged (debug and up), in order. */
  logs: string[];
  abort: AbortController;
  /** The executor's `forgetJob` for this job. */
  forgetJob(): void;
  run(fireTime: number, source?: ExecutionSource, options?: { mustRun?: boolean; item?: number; lockedAhead?: EarlyLock }): Promise<ExecutionStatus | 'deferred'>;
  /** The worker's lock taken while a request for `fireTime` waits for it, and its undoing. */
  lockAhead(fireTime: number, item?: number): Promise<EarlyLock | undefined>;
  unlockAhead(lock: EarlyLock): Promise<void>;
  /** `[fireTime, source]` of every execution started, in order (item 0 unless `item`). */
  starts(item?: number): Array<[number, ExecutionSource]>;
  /** `[fireTime, source, status]` of every finish record, in order (item 0 unless `item`). */
  finishes(item?: number): Array<[number, ExecutionSource, ExecutionStatus | undefined]>;
  /** Items the executor keeps claim and release counts for (none once nothing of it is under way). */
  counted(): { claims: number; releases: number };
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
 * An instance whose handler is `execute`. Sessions last 10 s unless told; `link` puts a relay
 * between it and ZooKeeper. `owns` is the worker's ownership check unless replaced.
 */
async function instance(
  instanceId: string,
  execute: (ctx: ShardingContext) => unknown,
  options: { link?: Link; sessionTimeoutMs?: number; owns?: (zk: ZkClient, sessionId: string) => boolean; handlers?: number; monitorExecution?: boolean } = {},
): Promise<Instance> {
  const monitorExecution = options.monitorExecution ?? true;
  const definition = defineJob({ name: JOB, cron: '0 0 * * * ?', shardingTotalCount: 2, shardingItemParameters: '0=A,1=B', misfire: true, monitorExecution, execute });
  const zk = await connectZk(options.link?.connectionString ?? server.connectionString, { namespace, sessionTimeoutMs: options.sessionTimeoutMs ?? 10_000 });
  const records: ExecutionEvent[] = [];
  const logs: string[] = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => void logs.push((JSON.parse(line) as { msg: string }).msg) });
  const abort = new AbortController();
  // As the worker: the session the execution started on, still within reach of the server.
  const owns = options.owns ?? ((client, sessionId) => client.sessionId === sessionId && Date.now() < client.contactDeadline());
  const executor = new ItemExecutor({
    zk,
    instanceId,
    log,
    config: () => definition.config,
    owns: (sessionId) => owns(zk, sessionId),
    abortSignal: () => abort.signal,
    handlers: new Semaphore(options.handlers ?? 10),
    record: (r) => records.push(r),
  });
  return {
    zk,
    records,
    logs,
    abort,
    forgetJob: () => executor.forgetJob(JOB),
    run: (fireTime, source = 'NORMAL', { mustRun = false, item = 0, lockedAhead } = {}) =>
      executor.run(definition, { job: JOB, item, fireTime, source, epoch: 1 }, { mustRun, lockedAhead }),
    lockAhead: async (fireTime, item = 0) => executor.lockAhead({ job: JOB, item, fireTime, source: 'NORMAL', epoch: 1 }),
    unlockAhead: (lock) => executor.unlockAhead(lock),
    starts: (item = 0) => records.filter((r) => r.event === 'start' && r.item === item).map((r) => [r.fireTime, r.source]),
    finishes: (item = 0) => records.filter((r) => r.event === 'finish' && r.item === item).map((r) => [r.fireTime, r.source, r.status]),
    // Private maps, read for their size only: a worker runs for months over items that come and go.
    counted: () => {
      const lock = (executor['lock'] as unknown as { monitored: { claims: Map<string, number>; releases: Map<string, number> } }).monitored;
      return { claims: lock.claims.size, releases: lock.releases.size };
    },
  };
}

/**
 * An instance behind a fresh relay, its ZooKeeper events recorded from now on; `handler` builds
 * the instance's handler and may act on the relay.
 */
async function relayed(
  instanceId: string,
  handler: (relay: Link) => (ctx: ShardingContext) => unknown = () => () => undefined,
): Promise<{ relay: Link; a: Instance; events: string[]; session: string }> {
  const relay = await link();
  const a = await instance(instanceId, handler(relay), { link: relay });
  return { relay, a, events: recordZkEvents(a.zk), session: a.zk.sessionId };
}

/** A handler that does `arm` in its first run only (to act on the release that follows that run). */
function onFirstRun(arm: () => void): () => void {
  let armed = false;
  return () => {
    if (!armed) arm();
    armed = true;
  };
}

/** Lays out the item's node, as the leader does when it registers a job. */
async function layOutItem(item = 0): Promise<void> {
  await admin.ensurePath(paths.shardingItem(JOB, item));
}

/** The item's completed fires as stored in ZooKeeper. */
async function completedList(item = 0): Promise<number[]> {
  const { data } = await admin.get(paths.shardingItem(JOB, item));
  return parseCompletedFires(data);
}

/** The session holding the item's `running` node, if any. */
async function runningOwner(item = 0): Promise<string | undefined> {
  return (await admin.exists(paths.shardingRunning(JOB, item)))?.ephemeralOwner;
}

/** After a run: the item is free, has no misfire mark, and its completed fires are `fires`. */
async function expectSettled(fires: number[], item = 0): Promise<void> {
  expect(await runningOwner(item)).toBeUndefined();
  expect(await admin.exists(paths.shardingMisfire(JOB, item))).toBeNull();
  expect(await completedList(item)).toEqual(fires);
}

describe('ItemExecutor with monitorExecution (real ZooKeeper)', () => {
  it('holds the running node on its own session while the handler runs, and records each fire with the release', async () => {
    const seen: Array<{ owner?: string; data?: string; completed: number[] }> = [];
    const a = await instance('a', async () => {
      const { data, stat } = await admin.get(RUNNING);
      seen.push({ owner: stat.ephemeralOwner, data: data.toString(), completed: await completedList() });
    });
    for (let f = 1000; f <= 5000; f += 1000) await expect(a.run(f)).resolves.toBe('completed');
    // Under the lock the fire is not recorded yet; it is recorded together with the release.
    expect(seen).toEqual([
      { owner: a.zk.sessionId, data: 'a', completed: [] },
      { owner: a.zk.sessionId, data: 'a', completed: [1000] },
      { owner: a.zk.sessionId, data: 'a', completed: [1000, 2000] },
      { owner: a.zk.sessionId, data: 'a', completed: [1000, 2000, 3000] },
      { owner: a.zk.sessionId, data: 'a', completed: [1000, 2000, 3000, 4000] },
    ]);
    expect(a.finishes()).toEqual([1000, 2000, 3000, 4000, 5000].map((f) => [f, 'NORMAL', 'completed']));
    await expectSettled([1000, 2000, 3000, 4000, 5000]);
    // Nothing is left under the item: no lock, no mark, no failover marker.
    expect(await admin.children(ITEM)).toEqual([]);
    // Nor in the executor's counts.
    expect(a.counted()).toEqual({ claims: 0, releases: 0 });
  });

  it('gives the handler its context', async () => {
    let seen: ShardingContext | undefined;
    let owned = true;
    const a = await instance('a', (ctx) => void (seen = ctx), { owns: (client, sessionId) => owned && client.sessionId === sessionId });
    await expect(a.run(5000)).resolves.toBe('completed');
    expect(seen).toMatchObject({ jobName: JOB, shardingItem: 0, shardingParameter: 'A', shardingTotalCount: 2, fireTime: 5000, source: 'NORMAL', instanceId: 'a', taskId: `${JOB}@-@5000@-@0@-@a` });
    expect(typeof seen!.log.info).toBe('function');
    expect(seen!.signal.aborted).toBe(false);
    // After the run the session is still ours: the check passes.
    expect(() => seen!.assertOwnership()).not.toThrow();
    // Taken off the context, as job code may: each still answers for this execution.
    const { assertOwnership, attempt, signal, log } = seen!;
    expect(() => assertOwnership()).not.toThrow();
    expect([attempt, signal.aborted, typeof log.info]).toEqual([1, false, 'function']);
    // The context shows its data and nothing of the execution's own state.
    expect(Object.keys(seen!).sort()).toEqual(['fireTime', 'instanceId', 'jobName', 'jobParameter', 'shardingItem', 'shardingParameter', 'shardingTotalCount', 'source', 'taskId']);
    // Once the item may be someone else's, the check throws NOT_OWNER, the destructured one too.
    owned = false;
    expect(() => seen!.assertOwnership()).toThrow(expect.objectContaining({ code: ErrorCodes.NOT_OWNER }));
    expect(() => assertOwnership()).toThrow(expect.objectContaining({ code: ErrorCodes.NOT_OWNER }));
  });

  it('locks without reading the item while its completed fires are as it last saw them, and reads them again once another instance changed them', async () => {
    const relay = await link();
    const a = await instance('a', () => undefined, { link: relay });
    const b = await instance('b', () => undefined);
    await expect(a.run(1000)).resolves.toBe('completed');
    // A read of the item from here on loses the connection: a notices it.
    relay.loseNextAnswer({ op: OP.getData, path: ITEM });
    const events = recordZkEvents(a.zk);
    await expect(a.run(2000)).resolves.toBe('completed');
    await expect(a.run(3000)).resolves.toBe('completed');
    expect(events).toEqual([]);
    // b completes a fire: a's version check fails, and a reads the item (losing that answer once).
    await expect(b.run(4000)).resolves.toBe('completed');
    await expect(a.run(4000)).resolves.toBe('skipped');
    expect(events).toEqual(['suspended', 'reconnected']);
    await expect(a.run(5000)).resolves.toBe('completed');
    expect(a.starts()).toEqual([[1000, 'NORMAL'], [2000, 'NORMAL'], [3000, 'NORMAL'], [5000, 'NORMAL']]);
    await expectSettled([1000, 2000, 3000, 4000, 5000]);
  });

  describe('whether a misfire mark is left after a release', () => {
    it('is told by the item node cversion, with no listing, while only its own lock changed the children since a release that left no mark', async () => {
      const { relay, a, events } = await relayed('a');
      // The first release lists the children (nothing known yet); the later ones need not.
      await expect(a.run(1000)).resolves.toBe('completed');
      relay.loseNextAnswer({ op: OP.getChildren2, path: ITEM });
      for (const f of [2000, 3000, 4000]) await expect(a.run(f)).resolves.toBe('completed');
      expect(events).toEqual([]);
      // A child created and deleted in between (an operator's node): the next release lists again.
      await admin.create(`${ITEM}/note`, 'x');
      await admin.delete(`${ITEM}/note`);
      await expect(a.run(5000)).resolves.toBe('completed');
      expect(events).toEqual(['suspended', 'reconnected']);
      await expectSettled([1000, 2000, 3000, 4000, 5000]);
    });

    it('finds a mark made while the item was free, though its view of the item was fresh', async () => {
      const a = await instance('a', () => undefined);
      await expect(a.run(1000)).resolves.toBe('completed');
      await expect(a.run(2000)).resolves.toBe('completed');
      await admin.create(MISFIRE, '2500');
      await expect(a.run(3000)).resolves.toBe('completed');
      expect(a.starts()).toEqual([[1000, 'NORMAL'], [2000, 'NORMAL'], [3000, 'NORMAL'], [2500, 'MISFIRE']]);
      await expectSettled([1000, 2000, 3000, 2500]);
    });

    it('finds a mark another instance made during the run', async () => {
      const gate = deferred();
      const a = await instance('a', (ctx) => (ctx.fireTime === 2000 ? gate.promise : undefined));
      const b = await instance('b', () => undefined);
      await expect(a.run(1000)).resolves.toBe('completed');
      const second = a.run(2000);
      await waitFor(() => a.starts().length === 2, { message: 'a runs fire 2000' });
      await expect(b.run(3000)).resolves.toBe('skipped');
      gate.resolve();
      await expect(second).resolves.toBe('completed');
      expect(a.starts()).toEqual([[1000, 'NORMAL'], [2000, 'NORMAL'], [3000, 'MISFIRE']]);
      // And after consuming it, the next runs know again that none is left.
      await expect(a.run(4000)).resolves.toBe('completed');
      await expectSettled([1000, 2000, 3000, 4000]);
    });
  });

  it('forgets what it knew of a job that was removed: a new item node reaching the remembered version is read', async () => {
    const a = await instance('a', () => undefined);
    const b = await instance('b', () => undefined);
    await expect(a.run(1000)).resolves.toBe('completed');
    // The job is removed and added again; b completes a fire on the new item node, whose version
    // is now the one a remembers for the old node, with other data.
    await admin.deleteRecursive(ITEM);
    await layOutItem();
    await expect(b.run(2000)).resolves.toBe('completed');
    expect((await admin.get(ITEM)).stat.version).toBe(1);
    a.forgetJob();
    await expect(a.run(2000, 'FAILOVER')).resolves.toBe('skipped');
    expect(a.starts()).toEqual([[1000, 'NORMAL']]);
    await expectSettled([2000]);
  });

  it('skips a fire another instance completed, whatever the source', async () => {
    const a = await instance('a', () => undefined);
    const b = await instance('b', () => undefined);
    await expect(b.run(1000)).resolves.toBe('completed');
    await expect(a.run(2000)).resolves.toBe('completed');
    await expect(b.run(2000, 'FAILOVER')).resolves.toBe('skipped');
    await expect(b.run(2000, 'NORMAL')).resolves.toBe('skipped');
    expect(a.starts()).toEqual([[2000, 'NORMAL']]);
    expect(b.starts()).toEqual([[1000, 'NORMAL']]);
    expect(b.finishes().slice(1)).toEqual([
      [2000, 'FAILOVER', 'skipped'],
      [2000, 'NORMAL', 'skipped'],
    ]);
    expect(await admin.exists(FAILOVER)).toBeNull();
    await expect(b.run(3000)).resolves.toBe('completed');
    await expectSettled([1000, 2000, 3000]);
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
    expect(await runningOwner()).toBe(a.zk.sessionId);
    gate.resolve();
    await expect(first).resolves.toBe('completed');
    expect(a.starts()).toEqual([[1000, 'NORMAL'], [2000, 'MISFIRE']]);
    expect(b.starts()).toEqual([]);
    await expectSettled([1000, 2000]);
  });

  it('keeps a mark that a newer fire changed during the re-run, and runs that fire next', async () => {
    const gates = new Map([
      [1000, deferred()],
      [2000, deferred()],
    ]);
    const a = await instance('a', (ctx) => gates.get(ctx.fireTime)?.promise);
    const b = await instance('b', () => undefined);
    const c = await instance('c', () => undefined);
    const first = a.run(1000);
    await waitFor(() => a.starts().length === 1, { message: 'a runs fire 1000' });
    await expect(b.run(2000)).resolves.toBe('skipped');
    gates.get(1000)!.resolve();
    await waitFor(() => a.starts().length === 2, { message: 'a re-runs fire 2000' });
    // The re-run holds the mark it stands for at its first version; fire 3000 moves it on.
    await expect(c.run(3000)).resolves.toBe('skipped');
    expect(await admin.getText(MISFIRE)).toBe('3000');
    gates.get(2000)!.resolve();
    await expect(first).resolves.toBe('completed');
    expect(a.starts()).toEqual([[1000, 'NORMAL'], [2000, 'MISFIRE'], [3000, 'MISFIRE']]);
    expect(a.finishes()).toEqual([
      [1000, 'NORMAL', 'completed'],
      [2000, 'MISFIRE', 'completed'],
      [3000, 'MISFIRE', 'completed'],
    ]);
    await expectSettled([1000, 2000, 3000]);
  });

  it('closes the race of a holder finishing between the failed create and the mark', async () => {
    const relay = await link();
    const gate = deferred();
    const a = await instance('a', () => gate.promise);
    const b = await instance('b', () => undefined, { link: relay });
    const first = a.run(1000);
    await waitFor(() => a.starts().length === 1, { message: 'a runs fire 1000' });
    // b's first look at the mark (after its create failed) is held back on the wire until a has
    // finished and released, without any mark to see.
    const held = relay.holdNext({ op: OP.getData, path: MISFIRE });
    const bRun = b.run(2000);
    const resume = await held;
    expect(await runningOwner()).toBe(a.zk.sessionId);
    gate.resolve();
    await expect(first).resolves.toBe('completed');
    expect(await runningOwner()).toBeUndefined();
    expect(await admin.exists(MISFIRE)).toBeNull();
    resume();
    await bRun;
    // Fire 2000 is not lost: b marked it, found the item free, and ran it itself (once); the mark
    // it left is consumed with that run (see the status test below for what run() resolves with).
    expect([...a.starts(), ...b.starts()]).toEqual([[1000, 'NORMAL'], [2000, 'NORMAL']]);
    expect(b.finishes()[0]).toEqual([2000, 'NORMAL', 'completed']);
    await expectSettled([1000, 2000]);
  });

  it('does not take its own node for an orphan when its own release overtakes the look at it', async () => {
    const relay = await link();
    await layOutItem();
    const gate = deferred();
    const a = await instance('a', (ctx) => (ctx.fireTime === 1000 ? gate.promise : undefined), { link: relay });
    const first = a.run(1000);
    await waitFor(() => a.starts().length === 1, { message: 'a runs fire 1000' });
    // A failed-over request of the same process (for an older fire, which waits for no run of ours
    // in flight) finds the item taken by its own session. Its look at the node is held on the wire,
    // and the release of the run holding it is sent behind it: the server answers "ours" and then
    // deletes the node, and the answers arrive together.
    const held = relay.holdNext({ op: OP.getData, path: RUNNING });
    const second = a.run(500, 'FAILOVER');
    const resume = await held;
    gate.resolve();
    await waitFor(() => a.finishes().length === 1 || undefined, { timeoutMs: 300 }).catch(() => undefined);
    resume();
    await expect(first).resolves.toBe('completed');
    // The node it saw was the one being released, not an orphan: it waits for that release here
    // (the holder is this process) and then runs as itself.
    await expect(second).resolves.toBe('completed');
    expect(a.logs).not.toContain(ADOPTED);
    expect(a.starts()).toEqual([[1000, 'NORMAL'], [500, 'FAILOVER']]);
    expect(await runningOwner()).toBeUndefined();
    await expectSettled([1000, 500]);
    expect(a.counted()).toEqual({ claims: 0, releases: 0 });
  });

  it('resolves with the status of the run it made, not of a re-run round skipped because that fire completed meanwhile', async () => {
    const gate = deferred();
    const a = await instance('a', (ctx) => (ctx.source === 'NORMAL' ? gate.promise : undefined));
    const b = await instance('b', () => undefined);
    const first = a.run(1000);
    await waitFor(() => a.starts().length === 1, { message: 'a runs fire 1000' });
    // The same fire again (a replayed dispatch) finds the item busy: it becomes a mark for fire 1000.
    await expect(b.run(1000)).resolves.toBe('skipped');
    expect(await admin.getText(MISFIRE)).toBe('1000');
    gate.resolve();
    const status = await first;
    // a ran fire 1000 once and completed it; the mark's round found 1000 done and only consumed it.
    expect(a.starts()).toEqual([[1000, 'NORMAL']]);
    expect(a.finishes()).toEqual([
      [1000, 'NORMAL', 'completed'],
      [1000, 'MISFIRE', 'skipped'],
    ]);
    await expectSettled([1000]);
    expect(status).toBe('completed');
  });

  // The worker's check, and a process that has not noticed yet: the release is bound to the session
  // the lock was taken on either way, so it cannot touch the lock the next holder took.
  it.each([
    // The handler's return is not a completion: the session it started on is gone.
    ['with the worker ownership check', undefined, undefined],
    // The completion is attempted, and the release bound to the dead session is refused.
    ['even when the execution still believes it owns the item', () => true, expect.stringContaining('could not be recorded')],
  ])('does not release a lock once its session is gone, and does not record that run (%s)', async (_, owns, reason) => {
    const relay = await link();
    const gate = deferred();
    const a = await instance('a', () => gate.promise, { link: relay, sessionTimeoutMs: 1_000, owns });
    const first = a.run(1000);
    await waitFor(() => a.starts().length === 1, { message: 'a runs fire 1000' });
    const oldSession = a.zk.sessionId;
    expect(await runningOwner()).toBe(oldSession);
    // a is cut off for longer than its session: the server expires it and deletes a's node.
    relay.cut();
    await waitFor(async () => (await runningOwner()) === undefined, { message: "a's session expired by the server" });
    relay.heal();
    await waitFor(() => a.zk.state === 'connected' && a.zk.sessionId !== oldSession, { message: 'a on a new session' });
    // b2 takes the item (as a failover) and holds it while a's handler finishes.
    const bGate = deferred();
    const b2 = await instance('b2', () => bGate.promise);
    const bHeld = b2.run(1000, 'FAILOVER');
    await waitFor(async () => (await runningOwner()) === b2.zk.sessionId, { message: 'b2 holds the item' });
    gate.resolve();
    await expect(first).resolves.toBe('aborted');
    expect(a.records.filter((r) => r.event === 'finish')).toEqual([expect.objectContaining({ fireTime: 1000, status: 'aborted', reason })]);
    // Refused as expired: no fallback delete was tried on the node b2 holds now.
    expect(a.logs).not.toContain(RELEASE_FAILED);
    expect(await runningOwner()).toBe(b2.zk.sessionId);
    expect(await completedList()).toEqual([]);
    bGate.resolve();
    await expect(bHeld).resolves.toBe('completed');
    expect(await completedList()).toEqual([1000]);
    const b = await instance('b', () => undefined);
    await expect(b.run(1000, 'FAILOVER')).resolves.toBe('skipped');
    expect(b.starts()).toEqual([]);
    await expectSettled([1000]);
  });

  it('defers a failover request that finds its item running instead of folding it into a misfire', async () => {
    const gate = deferred();
    const a = await instance('a', () => gate.promise);
    const b = await instance('b', () => undefined);
    const first = a.run(1000);
    await waitFor(() => a.starts().length === 1, { message: 'a runs fire 1000' });
    await expect(b.run(900, 'FAILOVER')).resolves.toBe('deferred');
    // A request put back after an abort must run too: deferred, not marked.
    await expect(b.run(800, 'NORMAL', { mustRun: true })).resolves.toBe('deferred');
    expect(await admin.exists(MISFIRE)).toBeNull();
    expect(b.records).toEqual([]);
    gate.resolve();
    await expect(first).resolves.toBe('completed');
    expect(a.starts()).toEqual([[1000, 'NORMAL']]);
    let failoverMarker: string | undefined;
    const c = await instance('c', async () => void (failoverMarker = await admin.getText(FAILOVER)));
    await expect(c.run(900, 'FAILOVER')).resolves.toBe('completed');
    // While it ran, the failover marker named the instance running it; it is gone after.
    expect(failoverMarker).toBe('c');
    expect(c.starts()).toEqual([[900, 'FAILOVER']]);
    expect(await admin.exists(FAILOVER)).toBeNull();
    await expectSettled([1000, 900]);
  });

  it('adopts its own running node when the answer to its lock request was lost', async () => {
    await layOutItem();
    const { relay, a, events, session } = await relayed('a');
    // The create reaches the server and is applied; the answer (and the read behind it) is lost.
    relay.loseNextAnswer({ op: OP.create, path: RUNNING });
    await expect(a.run(1000)).resolves.toBe('completed');
    expect(events).toEqual(['suspended', 'reconnected']);
    expect(a.logs.filter((m) => m === ADOPTED)).toHaveLength(1);
    expect(a.zk.sessionId).toBe(session);
    await expect(a.run(2000)).resolves.toBe('completed');
    expect(a.starts()).toEqual([[1000, 'NORMAL'], [2000, 'NORMAL']]);
    await expectSettled([1000, 2000]);
  });

  it('takes the lock again when its lock request was lost before it reached ZooKeeper', async () => {
    await layOutItem();
    const { relay, a, events, session } = await relayed('a');
    relay.cutAtNext({ op: OP.create, path: RUNNING });
    const result = a.run(1000);
    await waitFor(() => relay.isCut, { message: 'the lock request was cut' });
    expect(await runningOwner()).toBeUndefined();
    relay.heal();
    await expect(result).resolves.toBe('completed');
    expect(events).toEqual(['suspended', 'reconnected']);
    // The node was not there: a plain second create, nothing to adopt.
    expect(a.logs).not.toContain(ADOPTED);
    expect(a.zk.sessionId).toBe(session);
    expect(a.starts()).toEqual([[1000, 'NORMAL']]);
    await expectSettled([1000]);
  });

  it('does not take a lost read of the completed fires for an empty list', async () => {
    const relay = await link();
    const b = await instance('b', () => undefined);
    await expect(b.run(1000)).resolves.toBe('completed');
    const a = await instance('a', () => undefined, { link: relay });
    const events = recordZkEvents(a.zk);
    // a takes the lock; the answer to the read right behind it is lost with the connection.
    relay.loseNextAnswer({ op: OP.getData, path: ITEM });
    const outcome = await a.run(1000).catch((err: unknown) => err);
    expect(events).toEqual(['suspended', 'reconnected']);
    // Fire 1000 is done: it must not run again, whether the executor reads again or gives the request back.
    expect(a.starts()).toEqual([]);
    if (typeof outcome === 'string') expect(outcome).toBe('skipped');
    else expect(outcome).toMatchObject({ code: ErrorCodes.ZK_CONNECTION_LOSS });
    await expectSettled([1000]);
    await expect(a.run(2000)).resolves.toBe('completed');
    await expectSettled([1000, 2000]);
  });

  it('never adopts a node another execution of this process holds', async () => {
    const gate = deferred();
    const a = await instance('a', (ctx) => (ctx.fireTime === 1000 ? gate.promise : undefined));
    const first = a.run(1000);
    await waitFor(() => a.starts().length === 1, { message: 'a runs fire 1000' });
    // Same session, same item: the node is ours but held, so this is a misfire, not an adoption.
    await expect(a.run(2000)).resolves.toBe('skipped');
    expect(await admin.getText(MISFIRE)).toBe('2000');
    expect(a.logs).not.toContain(ADOPTED);
    expect(a.starts()).toEqual([[1000, 'NORMAL']]);
    gate.resolve();
    await expect(first).resolves.toBe('completed');
    expect(a.starts()).toEqual([[1000, 'NORMAL'], [2000, 'MISFIRE']]);
    await expectSettled([1000, 2000]);
  });

  it('runs the items of a job independently: a busy item does not hold up another', async () => {
    const gate = deferred();
    const a = await instance('a', () => undefined);
    const b = await instance('b', (ctx) => (ctx.fireTime === 3000 ? gate.promise : undefined));
    await expect(Promise.all([a.run(1000, 'NORMAL', { item: 0 }), a.run(1000, 'NORMAL', { item: 1 })])).resolves.toEqual(['completed', 'completed']);
    const held = b.run(3000, 'NORMAL', { item: 1 });
    await waitFor(() => b.starts(1).length === 1, { message: 'b runs item 1' });
    await expect(Promise.all([a.run(3000, 'NORMAL', { item: 0 }), a.run(3000, 'NORMAL', { item: 1 })])).resolves.toEqual(['completed', 'skipped']);
    expect(await admin.getText(paths.shardingMisfire(JOB, 1))).toBe('3000');
    gate.resolve();
    await held;
    expect(a.starts(0)).toEqual([[1000, 'NORMAL'], [3000, 'NORMAL']]);
    expect(a.starts(1)).toEqual([[1000, 'NORMAL']]);
    // a's fire 3000 of item 1 became a misfire mark, which b consumed: 3000 already completed there.
    expect(b.starts(1)).toEqual([[3000, 'NORMAL']]);
    expect(b.finishes(1)).toEqual([
      [3000, 'NORMAL', 'completed'],
      [3000, 'MISFIRE', 'skipped'],
    ]);
    await expectSettled([1000, 3000], 0);
    await expectSettled([1000, 3000], 1);
  });

  it('a mark left by a holder that died is found by the next holder', async () => {
    const a = await instance('a', () => undefined);
    const bGate = deferred();
    const b = await instance('b', () => bGate.promise);
    const c = await instance('c', () => undefined);
    await expect(a.run(1000)).resolves.toBe('completed');
    const bRun = b.run(2000);
    await waitFor(() => b.starts().length === 1, { message: 'b runs fire 2000' });
    await expect(c.run(3000)).resolves.toBe('skipped'); // marks 3000 for the holder
    expect(await admin.getText(MISFIRE)).toBe('3000');
    // b dies holding the item: its session ends with it, and it never reads the mark.
    await b.zk.close();
    expect(await runningOwner()).toBeUndefined();
    bGate.resolve();
    await expect(bRun).resolves.toBe('aborted');
    expect(await admin.getText(MISFIRE)).toBe('3000');
    await expect(a.run(4000)).resolves.toBe('completed');
    expect(a.starts()).toEqual([[1000, 'NORMAL'], [4000, 'NORMAL'], [3000, 'MISFIRE']]);
    await expectSettled([1000, 4000, 3000]);
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
    expect(await runningOwner()).toBeUndefined();
    expect(await completedList()).toEqual([1000]);
    await expect(a.run(3000)).resolves.toBe('completed');
    expect(a.starts()).toEqual([[1000, 'NORMAL'], [2000, 'MISFIRE'], [3000, 'NORMAL'], [2000, 'MISFIRE']]);
    await expectSettled([1000, 3000, 2000]);
  });

  it('reports a run as aborted when its release was lost with its session, saying the completion may be recorded; a failover skips it if it was', async () => {
    const relay = await link();
    // The release is applied by the server; its answer is lost, and a stays cut off past its session.
    const a = await instance('a', () => relay.loseNextAnswer({ op: OP.multi }, { thenCut: true }), { link: relay, sessionTimeoutMs: 1_000 });
    const session = a.zk.sessionId;
    const result = a.run(1000);
    await waitFor(() => relay.isCut, { message: 'the answer to the release was lost' });
    await waitFor(() => a.zk.state !== 'connected', { message: 'a noticed the lost connection' });
    // A server-side expiry leaves no trace a test can poll here (the release already deleted the node).
    await sleep(2_500);
    relay.heal();
    await expect(result).resolves.toBe('aborted');
    expect(a.zk.sessionId).not.toBe(session);
    expect(a.records.find((r) => r.event === 'finish')).toMatchObject({ status: 'aborted', reason: expect.stringContaining('may have been recorded') });
    // It was: the request put back and failed over finds the fire done and does not run it again.
    expect(await completedList()).toEqual([1000]);
    const b = await instance('b', () => undefined);
    await expect(b.run(1000, 'FAILOVER')).resolves.toBe('skipped');
    expect(b.starts()).toEqual([]);
    await expectSettled([1000]);
  });

  it('reports a run whose completion could not be recorded as aborted, not completed', async () => {
    const relay = await link();
    // The handler returns while a still owns the item; the release that follows never reaches
    // ZooKeeper, and a stays cut off until the server expired its session.
    const a = await instance('a', () => relay.cutAtNext({ op: OP.multi }), { link: relay, sessionTimeoutMs: 1_000 });
    const result = a.run(1000);
    await waitFor(() => relay.isCut, { message: 'the release multi was cut' });
    await waitFor(async () => (await runningOwner()) === undefined, { message: "a's session expired by the server" });
    relay.heal();
    await expect(result).resolves.toBe('aborted');
    // a cannot tell a release that never arrived from one whose answer was lost.
    expect(a.records.find((r) => r.event === 'finish')).toMatchObject({ status: 'aborted', reason: expect.stringContaining('may have been recorded') });
    expect(await completedList()).toEqual([]);
    const b = await instance('b', () => undefined);
    await expect(b.run(1000, 'FAILOVER')).resolves.toBe('completed');
    await expectSettled([1000]);
  });

  it('frees the item on the same session when its release never reached ZooKeeper, and reports the run as ZooKeeper recorded it', async () => {
    const { relay, a, events, session } = await relayed('a', (r) => onFirstRun(() => r.cutAtNext({ op: OP.multi })));
    const result = a.run(1000);
    await waitFor(() => relay.isCut, { message: 'the release multi was cut' });
    expect(await runningOwner()).toBe(session);
    relay.heal();
    const status = await result;
    // The session survived: the node, still ours, is not left to block the item for the session's
    // life (whether the executor sends the release again or only deletes its node).
    expect(events).toEqual(['suspended', 'reconnected']);
    expect(a.zk.sessionId).toBe(session);
    expect(await runningOwner()).toBeUndefined();
    expect(a.starts()).toEqual([[1000, 'NORMAL']]);
    // Completed if and only if the completion was recorded; an aborted run may (and does) run again.
    expect(['completed', 'aborted']).toContain(status);
    expect(await completedList()).toEqual(status === 'completed' ? [1000] : []);
    expect(a.finishes()).toEqual([[1000, 'NORMAL', status]]);
    await expect(a.run(1000, 'NORMAL', { mustRun: true })).resolves.toBe(status === 'completed' ? 'skipped' : 'completed');
    expect(a.starts()).toEqual(status === 'completed' ? [[1000, 'NORMAL']] : [[1000, 'NORMAL'], [1000, 'NORMAL']]);
    await expectSettled([1000]);
  });

  describe('a release whose answer was lost', () => {
    async function loseReleaseAnswer(): Promise<{ a: Instance; status: ExecutionStatus | 'deferred'; events: string[]; session: string }> {
      // The release that follows is applied by the server; its answer is lost with the connection.
      const { a, events, session } = await relayed('a', (relay) => onFirstRun(() => relay.loseNextAnswer({ op: OP.multi })));
      const status = await a.run(1000);
      return { a, status, events, session };
    }

    it('went through: the fire is recorded once, the item is free, and a retry of the request does not run it again', async () => {
      const { a, events, session } = await loseReleaseAnswer();
      expect(events).toEqual(['suspended', 'reconnected']);
      expect(a.zk.sessionId).toBe(session);
      await expectSettled([1000]);
      // Whatever was reported, the same request taken again (as the worker does after an abort) is skipped.
      await expect(a.run(1000, 'NORMAL', { mustRun: true })).resolves.toBe('skipped');
      await expect(a.run(2000)).resolves.toBe('completed');
      expect(a.starts()).toEqual([[1000, 'NORMAL'], [2000, 'NORMAL']]);
      await expectSettled([1000, 2000]);
    });

    it('is reported completed, since the release with the completion committed', async () => {
      const { a, status } = await loseReleaseAnswer();
      await expectSettled([1000]);
      expect(a.finishes()).toEqual([[1000, 'NORMAL', 'completed']]);
      expect(status).toBe('completed');
    });

    it('is reported completed when ZooKeeper stays out of reach for longer than the connect timeout, but not the session timeout', async () => {
      // A ZooKeeper restart slower than the connect timeout (3 s here; the session lasts 10 s):
      // giving up on the look at our node reported this completion as not recorded, and the item ran again.
      const { relay, a, events, session } = await relayed('a', (r) => onFirstRun(() => r.loseNextAnswer({ op: OP.multi }, { thenCut: true })));
      const result = a.run(1000);
      await waitFor(() => relay.isCut, { message: 'the release answer lost and the link cut' });
      await sleep(4_000);
      relay.heal();
      await expect(result).resolves.toBe('completed');
      expect(events).toEqual(['suspended', 'reconnected']);
      expect(a.zk.sessionId).toBe(session);
      expect(a.finishes()).toEqual([[1000, 'NORMAL', 'completed']]);
      await expectSettled([1000]);
    });
  });

  describe('a lock taken ahead, while the request waits for its fire time', () => {
    it('is the lock the run uses: the item is held from then on, and the run records its fire with the release', async () => {
      const seen: Array<string | undefined> = [];
      const a = await instance('a', async () => void seen.push(await runningOwner()));
      await expect(a.run(1000)).resolves.toBe('completed');
      const early = await a.lockAhead(2000);
      expect(early).toBeDefined();
      expect(await runningOwner()).toBe(a.zk.sessionId);
      expect(await admin.getText(RUNNING)).toBe('a');
      // A second lock of the item by this process would have found it taken and skipped the run.
      await expect(a.run(2000, 'NORMAL', { lockedAhead: early })).resolves.toBe('completed');
      expect(seen).toEqual([a.zk.sessionId, a.zk.sessionId]);
      expect(a.finishes()).toEqual([[1000, 'NORMAL', 'completed'], [2000, 'NORMAL', 'completed']]);
      await expectSettled([1000, 2000]);
    });

    it('keeps another instance out until the run', async () => {
      const a = await instance('a', () => undefined);
      const b = await instance('b', () => undefined);
      await layOutItem();
      const early = await a.lockAhead(2000);
      await expect(b.run(1000, 'FAILOVER')).resolves.toBe('deferred');
      await expect(a.run(2000, 'NORMAL', { lockedAhead: early })).resolves.toBe('completed');
      await expect(b.run(1000, 'FAILOVER')).resolves.toBe('completed');
      expect(b.starts()).toEqual([[1000, 'FAILOVER']]);
      await expectSettled([2000, 1000]);
    });

    it('leaves an item that is running alone, with no misfire mark: the request locks at its fire time, after that run ended', async () => {
      const gate = deferred();
      const b = await instance('b', () => gate.promise);
      const a = await instance('a', () => undefined);
      const running = b.run(1000);
      await waitFor(() => b.starts().length === 1, { message: 'b runs fire 1000' });
      await expect(a.lockAhead(2000)).resolves.toBeUndefined();
      expect(await admin.exists(MISFIRE)).toBeNull();
      expect(await runningOwner()).toBe(b.zk.sessionId);
      gate.resolve();
      await expect(running).resolves.toBe('completed');
      await expect(a.run(2000)).resolves.toBe('completed');
      expect(b.starts()).toEqual([[1000, 'NORMAL']]);
      expect(a.starts()).toEqual([[2000, 'NORMAL']]);
      await expectSettled([1000, 2000]);
    });

    it('is given back, fire not recorded, when its request does not run', async () => {
      const a = await instance('a', () => undefined);
      const b = await instance('b', () => undefined);
      await layOutItem();
      const early = await a.lockAhead(2000);
      await a.unlockAhead(early!);
      await expectSettled([]);
      await expect(b.run(2000)).resolves.toBe('completed');
      await expectSettled([2000]);
    });

    it('does not run when its session stopped being ours while the request waited: the run is aborted and the item freed', async () => {
      let ours = true;
      const a = await instance('a', () => undefined, { owns: () => ours });
      await layOutItem();
      const early = await a.lockAhead(2000);
      ours = false;
      await expect(a.run(2000, 'NORMAL', { lockedAhead: early })).resolves.toBe('aborted');
      expect(a.starts()).toEqual([]);
      await expectSettled([]);
    });
  });

  describe('with more requests than handler places', () => {
    it('locks a waiting request\'s item but starts its handler only when a place frees, and frees the place before the release', async () => {
      const gate = deferred();
      let inHandler = 0;
      let peak = 0;
      const a = await instance(
        'a',
        async (ctx) => {
          inHandler += 1;
          peak = Math.max(peak, inHandler);
          if (ctx.shardingItem === 0) await gate.promise;
          inHandler -= 1;
        },
        { handlers: 1 },
      );
      await Promise.all([layOutItem(0), layOutItem(1)]);
      const first = a.run(1000, 'NORMAL', { item: 0 });
      await waitFor(() => a.starts(0).length === 1, { message: 'item 0 started' });
      const second = a.run(1000, 'NORMAL', { item: 1 });
      // Item 1 is taken (its lock held by our session) while its handler waits for the place.
      await waitFor(async () => (await runningOwner(1)) === a.zk.sessionId, { message: 'item 1 locked' });
      await sleep(100);
      expect(a.starts(1)).toEqual([]);
      gate.resolve();
      await expect(Promise.all([first, second])).resolves.toEqual(['completed', 'completed']);
      expect(peak).toBe(1);
      expect(a.starts(1)).toEqual([[1000, 'NORMAL']]);
      // Item 0's finish is recorded once its release answered; item 1 had its place before that.
      const at = (event: string, item: number) => a.records.findIndex((r) => r.event === event && r.item === item);
      expect(at('start', 1)).toBeLessThan(at('finish', 0));
      await expectSettled([1000], 0);
      await expectSettled([1000], 1);
    });

    it('does not start a handler whose session stopped being ours while it waited for a place (a frozen process): aborted, not run', async () => {
      const gate = deferred();
      let ours = true;
      const a = await instance('a', (ctx) => (ctx.shardingItem === 0 ? gate.promise : undefined), { handlers: 1, owns: () => ours });
      await Promise.all([layOutItem(0), layOutItem(1)]);
      const first = a.run(1000, 'NORMAL', { item: 0 });
      await waitFor(() => a.starts(0).length === 1, { message: 'item 0 started' });
      const second = a.run(1000, 'NORMAL', { item: 1 });
      await waitFor(async () => (await runningOwner(1)) === a.zk.sessionId, { message: 'item 1 locked' });
      // The watchdog has not yet run to abort anything: only the last look before the handler sees it.
      ours = false;
      gate.resolve();
      await expect(Promise.all([first, second])).resolves.toEqual(['aborted', 'aborted']);
      expect(a.starts(1)).toEqual([]);
      expect(a.records.find((r) => r.event === 'finish' && r.item === 1)?.reason).toBe(NOT_OWNED_AT_START);
    });

    it('gives back the lock of a request stopped while it waited for a place: aborted, not run, so it goes back to the queue', async () => {
      const gate = deferred();
      const a = await instance('a', (ctx) => (ctx.shardingItem === 0 ? gate.promise : undefined), { handlers: 1 });
      await Promise.all([layOutItem(0), layOutItem(1)]);
      const first = a.run(1000, 'NORMAL', { item: 0 });
      await waitFor(() => a.starts(0).length === 1, { message: 'item 0 started' });
      const second = a.run(1000, 'NORMAL', { item: 1 });
      await waitFor(async () => (await runningOwner(1)) === a.zk.sessionId, { message: 'item 1 locked' });
      a.abort.abort(new Error('stop'));
      await expect(second).resolves.toBe('aborted');
      expect(a.starts(1)).toEqual([]);
      expect(a.finishes(1)).toEqual([[1000, 'NORMAL', 'aborted']]);
      await expectSettled([], 1);
      gate.resolve();
      await first;
    });
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
    expect(await runningOwner()).toBe(a.zk.sessionId);
    a.abort.abort(new Error('stop'));
    await expect(running).resolves.toBe('aborted');
    expect(seen?.aborted).toBe(true);
    expect(a.finishes()).toEqual([[1000, 'NORMAL', 'aborted']]);
    expect(await runningOwner()).toBeUndefined();
    expect(await completedList()).toEqual([]);
  });
});

describe('ItemExecutor without monitorExecution', () => {
  it('keeps a misfire mark that a re-run found its item taken for, so the next holder runs it', async () => {
    // Found in review: the local lock consumed its mark when read. A trigger's re-run of the mark
    // takes the item without marking it again (owed work leaves no mark), so when the trigger it
    // woke took the item first, the fire that found the item running never ran.
    const first = deferred();
    const a = await instance('a', (ctx) => (ctx.fireTime === 1_000 ? first.promise : undefined), { monitorExecution: false });
    const triggered = a.run(1_000, 'TRIGGER');
    await waitFor(() => a.starts().length === 1, { message: 'the trigger started' });
    // A fire that finds the item running: a misfire mark, its own run skipped.
    await expect(a.run(2_000)).resolves.toBe('skipped');
    // Another trigger waits for the item, and takes it when the first run releases it.
    const again = a.run(3_000, 'TRIGGER');
    first.resolve();
    await expect(triggered).resolves.toBe('completed');
    await expect(again).resolves.toBe('completed');
    // The fire that found the item running ran once, as a misfire, by whichever request held the item next.
    expect(a.starts()).toEqual([[1_000, 'TRIGGER'], [3_000, 'TRIGGER'], [2_000, 'MISFIRE']]);
    await expect(a.run(4_000)).resolves.toBe('completed');
    expect(a.starts().filter(([, source]) => source === 'MISFIRE')).toEqual([[2_000, 'MISFIRE']]);
  });

  it('skips a request for a fire it already completed (a replay, a resumed failover, a reconcile), and remembers a bounded number of fires per item', async () => {
    const a = await instance('a', () => undefined, { monitorExecution: false });
    await expect(a.run(1_000)).resolves.toBe('completed');
    await expect(a.run(2_000)).resolves.toBe('completed');
    // The same fires again, under any source: not run a second time, said so in the record.
    await expect(a.run(1_000)).resolves.toBe('skipped');
    await expect(a.run(2_000, 'FAILOVER')).resolves.toBe('skipped');
    expect(a.starts()).toEqual([[1_000, 'NORMAL'], [2_000, 'NORMAL']]);
    expect(a.records.filter((r) => r.event === 'finish' && r.status === 'skipped').map((r) => r.reason)).toEqual([
      'this fire of the item already completed',
      'this fire of the item already completed',
    ]);
    // Another item is another list; nothing is written to ZooKeeper.
    await expect(a.run(1_000, 'NORMAL', { item: 1 })).resolves.toBe('completed');
    expect(await admin.exists(RUNNING)).toBeNull();
    // The oldest fires are forgotten beyond the bound: fire 1,000 runs again after 32 newer ones.
    for (let f = 3_000; f <= 34_000; f += 1_000) await a.run(f);
    await expect(a.run(1_000)).resolves.toBe('completed');
    // A removed job's items are forgotten with it.
    a.forgetJob();
    await expect(a.run(34_000)).resolves.toBe('completed');
  });
});
