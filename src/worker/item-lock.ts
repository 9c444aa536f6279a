import { ErrorCodes } from '../shared/errors';
import type { ExecutionRequest } from '../shared/execution-request';
import type { JobConfig } from '../shared/job-config';
import type { Logger } from '../shared/logger';
import { registryPaths } from '../shared/registry-paths';
import { isRetryable, ZkError, type ZkClient, type ZkOp } from '../shared/zk';
import type { ZkSessionOps } from '../shared/zk/zk-client';
import { CompletedFiresCache, parseCompletedFires, withCompletedFire, type CompletedFires } from './completed-fires';
import { MultiBatcher } from './multi-batcher';

/** A misfire mark as read: the fire it asks for, and the node version to delete it with. */
export interface MisfireMark {
  fireTime: number;
  version: number;
}

/** The item lock as taken. */
export interface Lock {
  /** The item's completed fires when the lock was taken (verified by version). */
  fires: CompletedFires;
  /** Identifies this hold among the executions of this process. */
  token: object;
  /**
   * A misfire mark may exist that nobody told us about by a version change: we left it ourselves
   * before getting the lock, or our view of the item comes from a read (see completed-fires.ts).
   */
  markPending: boolean;
}

/** What a release did: whether the completion is recorded, and the misfire mark found, if any. */
export interface ReleaseResult {
  recorded: boolean;
  found?: MisfireMark;
}

/** What the release of a monitored item does besides deleting `running`. */
export interface ReleaseOptions {
  /** Record the fire as completed (in the same multi). */
  completed: boolean;
  /** Delete this misfire mark (the round stood for it and completed, or its fire already had). */
  consume?: MisfireMark;
  /** Find out whether a misfire mark was left meanwhile (resolves with it). */
  watchMarks: boolean;
  /** Also delete our `sharding/{i}/failover` marker. */
  failoverMarker: boolean;
}

const is = (err: unknown, ...codes: string[]): err is ZkError => err instanceof ZkError && codes.includes(err.code);
/**
 * The ZooKeeper side of monitorExecution (DESIGN.md flow 4): the `running` ephemeral node as the
 * item lock (invariant I1), the completed-fires list that makes a duplicate request a no-op, and the
 * misfire marks that hand a busy item's fire to its holder. Common path per execution: two
 * transactions on the session that holds the lock, `check(sharding/{i}) + create(running)` and
 * `set(sharding/{i}) + delete(running)`, each merged with those of other items issued in the same
 * event-loop turn, and no reads. See docs/design-notes.md, "Worker hot path".
 */
export class ItemLocks {
  /**
   * Items (`{job}|{item}`) an execution of this process holds, from lock to release, with a token
   * per hold: a release that ends after another local execution took the item must not forget it.
   */
  private readonly localRunning = new Map<string, object>();
  private readonly completed = new CompletedFiresCache();
  /** Locks and releases of items issued in the same event-loop turn share one transaction. */
  private readonly batcher = new MultiBatcher();

  constructor(private readonly ctx: { zk: ZkClient; instanceId: string; log: Logger }) {}

  /** Forgets our view of an item: the next lock reads it, and looks for misfire marks. */
  forget(key: string): void {
    this.completed.forget(key);
  }

  /**
   * Takes the item's lock; resolves undefined when the item is busy. A busy item gets a misfire
   * mark (when `markOnBusy` and misfire is on) and then its holder is told (see {@link bumpItem}).
   */
  async acquire(
    zk: ZkSessionOps,
    config: JobConfig,
    request: ExecutionRequest,
    key: string,
    markOnBusy: boolean,
    markKnown: boolean,
  ): Promise<Lock | undefined> {
    const running = registryPaths.shardingRunning(request.job, request.item);
    const mark = config.misfire && markOnBusy;
    let marked = false;
    // Twice: a holder may release between our failed create and our misfire mark, without seeing
    // the mark; then the item is free and we take it ourselves (and run the mark after our run).
    for (let attempt = 0; attempt < 2; attempt += 1) {
      const fires = await this.lock(zk, request, key);
      if (fires) return { ...fires, markPending: marked || markKnown || fires.fires.read === true };
      if (mark) {
        await this.markMisfire(request);
        marked = true;
      }
      if (config.misfire && (marked || markKnown)) await this.bumpItem(request);
      const stat = await zk.exists(running);
      if (!stat) continue;
      // Our own session's node that no execution of ours holds: a lock request (or a release)
      // whose answer was lost with the connection did take effect. Nobody else can hold or delete
      // that node, so it is ours to use; otherwise the item would stay blocked for the whole session.
      if (stat.ephemeralOwner === zk.sessionId && !this.localRunning.has(key)) {
        const token = {};
        this.localRunning.set(key, token);
        this.ctx.log.info({ job: request.job, item: request.item }, 'adopting our own orphaned running node');
        try {
          return { fires: await this.readCompleted(zk, request, key), token, markPending: true };
        } catch (err) {
          this.localRunning.delete(key);
          throw err;
        }
      }
      return undefined;
    }
    return undefined;
  }

  /**
   * Tells whoever holds the item, or takes it next with an older view of it, that a misfire mark
   * was left: rewriting `sharding/{i}` with its own data moves its version, so the holder's release
   * (which writes or checks that node at the version it locked at) fails and reads the mark, and any
   * lock taken with a view from before fails its check and reads the list, hence the mark. Retried
   * until one write of ours lands after the mark. This replaces a read of the mark after every
   * execution: only requests that find the item busy pay.
   */
  private async bumpItem(request: ExecutionRequest): Promise<void> {
    const path = registryPaths.shardingItem(request.job, request.item);
    for (let attempt = 0; attempt < 10; attempt += 1) {
      try {
        const { data, stat } = await this.ctx.zk.get(path);
        await this.ctx.zk.set(path, data, stat.version);
        return;
      } catch (err) {
        if (is(err, ErrorCodes.ZK_NO_NODE)) return; // no item node, no holder and no view of it to correct
        if (!is(err, ErrorCodes.ZK_BAD_VERSION)) throw err;
      }
    }
  }

  /**
   * `check(sharding/{i}, cached version) + create(running)` in one multi: when it commits we hold
   * the lock and the cached list is the node's content at that moment. A failed check means another
   * holder recorded a completion since we last looked: read the list and try again.
   */
  private async lock(zk: ZkSessionOps, request: ExecutionRequest, key: string): Promise<{ fires: CompletedFires; token: object } | undefined> {
    const itemPath = registryPaths.shardingItem(request.job, request.item);
    const running = registryPaths.shardingRunning(request.job, request.item);
    for (let attempt = 0; ; attempt += 1) {
      const state = this.completed.get(key) ?? (await this.readCompleted(zk, request, key));
      try {
        await this.batcher.commit(zk, [
          { type: 'check', path: itemPath, version: state.version },
          { type: 'create', path: running, data: this.ctx.instanceId, mode: 'ephemeral' },
        ]);
        const token = {};
        this.localRunning.set(key, token);
        return { fires: state, token };
      } catch (err) {
        if (is(err, ErrorCodes.ZK_NODE_EXISTS) && err.path === running) return undefined;
        if (!(is(err, ErrorCodes.ZK_BAD_VERSION, ErrorCodes.ZK_NO_NODE) && err.path === itemPath && attempt < 5)) throw err;
        this.completed.forget(key);
      }
    }
  }

  /** Reads the item's completed fires (creating the item node if absent) and caches them. */
  private async readCompleted(zk: ZkSessionOps, request: ExecutionRequest, key: string): Promise<CompletedFires> {
    const itemPath = registryPaths.shardingItem(request.job, request.item);
    let read: { data: Buffer; stat: { version: number } };
    try {
      read = await zk.get(itemPath);
    } catch (err) {
      if (!is(err, ErrorCodes.ZK_NO_NODE)) throw err;
      await zk.ensurePath(itemPath);
      read = await zk.get(itemPath);
    }
    const state = { list: parseCompletedFires(read.data), version: read.stat.version, read: true };
    this.completed.set(key, state);
    return state;
  }

  /** `sharding/{i}/failover` tells operators which instance runs a failed-over item. */
  async markFailover(zk: ZkSessionOps, request: ExecutionRequest): Promise<boolean> {
    try {
      await zk.create(registryPaths.shardingFailover(request.job, request.item), this.ctx.instanceId, 'ephemeral');
      return true;
    } catch (err) {
      this.ctx.log.debug({ err, job: request.job, item: request.item }, 'failover marker not written');
      return false;
    }
  }

  /**
   * Deletes the running node, on the session that created it: if that session is gone the multi
   * fails (another instance may hold the item now, and deleting its node would let a third one in),
   * and while it lives the node at that path can only be ours. After a completion the same multi
   * records the fire (with the version the lock was taken at) and deletes the misfire mark the run
   * stood for: the next holder can never see the item unlocked without seeing that this fire is done
   * and its mark consumed. Without a completion, the multi checks that version instead: either way
   * a BAD_VERSION there means a request left a misfire mark meanwhile (see {@link bumpItem}).
   * Resolves with whether the completion is recorded, and the mark found, if any.
   */
  async release(
    zk: ZkSessionOps,
    config: JobConfig,
    request: ExecutionRequest,
    key: string,
    held: Lock,
    options: ReleaseOptions,
  ): Promise<ReleaseResult> {
    try {
      return await this.unlock(zk, config, request, key, held, options);
    } finally {
      // Even when the delete failed: a node of ours left behind is then an orphan (see acquire).
      if (this.localRunning.get(key) === held.token) this.localRunning.delete(key);
    }
  }

  private async unlock(
    zk: ZkSessionOps,
    config: JobConfig,
    request: ExecutionRequest,
    key: string,
    held: Lock,
    options: ReleaseOptions,
  ): Promise<ReleaseResult> {
    const { job, item, fireTime } = request;
    const itemPath = registryPaths.shardingItem(job, item);
    const running = registryPaths.shardingRunning(job, item);
    const misfire = registryPaths.shardingMisfire(job, item);
    const failover = registryPaths.shardingFailover(job, item);
    let watch = options.watchMarks && config.misfire;
    let { completed, consume } = options;
    let state = held.fires;
    let markPending = held.markPending;
    let found: MisfireMark | undefined;
    let released = false;
    let recorded = false;
    for (let attempt = 0; attempt < 5 && !released; attempt += 1) {
      const list = completed ? withCompletedFire(state.list, fireTime) : undefined;
      const ops: ZkOp[] = [];
      if (list) ops.push({ type: 'set', path: itemPath, data: JSON.stringify(list), version: state.version });
      else if (watch) ops.push({ type: 'check', path: itemPath, version: state.version });
      ops.push({ type: 'delete', path: running, version: -1 });
      if (options.failoverMarker) ops.push({ type: 'delete', path: failover, version: -1 });
      if (consume) ops.push({ type: 'delete', path: misfire, version: consume.version });
      try {
        await this.batcher.commit(zk, ops);
        if (list) this.completed.set(key, { list, version: state.version + 1 });
        released = true;
        recorded = list !== undefined;
      } catch (err) {
        if (is(err, ErrorCodes.ZK_BAD_VERSION, ErrorCodes.ZK_NO_NODE) && err.path === itemPath) {
          // A request left a misfire mark (or a tool wrote the list): read both again.
          state = await this.readCompleted(zk, request, key).catch(() => ({ list: [], version: -1 }));
          if (state.version < 0) {
            completed = false;
            watch = false;
          }
          markPending = true;
          continue;
        }
        if (is(err, ErrorCodes.ZK_BAD_VERSION, ErrorCodes.ZK_NO_NODE) && err.path === misfire) {
          // The mark we consume was replaced by a newer fire's: keep it (it is taken next round).
          consume = undefined;
          markPending = true;
          continue;
        }
        this.completed.forget(key);
        // Our session is gone, and the server deleted our node with it: nothing left to release.
        if (is(err, ErrorCodes.ZK_SESSION_EXPIRED)) return { recorded: false };
        if (isRetryable(err)) {
          // The answer was lost: the multi may have been applied. Find out on our session (which
          // waits for the connection to come back), never by deleting a node that may not be ours.
          const outcome = await this.resolveLostRelease(zk, request, key, list !== undefined).catch(() => 'unknown' as const);
          if (outcome === 'applied') {
            released = true;
            recorded = list !== undefined;
            markPending = true;
            break;
          }
          if (outcome === 'not-applied') continue;
          // Unknown: leave `running` alone. If it is ours, our next request for the item adopts it.
          this.ctx.log.warn({ err, job, item }, 'could not tell whether the release reached ZooKeeper');
          return { recorded: false };
        }
        // Refused by the server (nothing applied, our node is still there): release the item only.
        this.ctx.log.warn({ err, job, item }, 'could not record the completion; releasing the item only');
        break;
      }
    }
    if (!released) {
      await zk.delete(running).catch((err) => {
        // Gone with a lost session is fine; anything else leaves the item blocked until the session ends.
        if (!is(err, ErrorCodes.ZK_NO_NODE, ErrorCodes.ZK_SESSION_EXPIRED)) this.ctx.log.warn({ err, job, item }, 'could not delete running node');
      });
      if (options.failoverMarker) await zk.delete(failover).catch(() => undefined);
    }
    if (!watch) {
      // A mark may be left (an aborted run, a re-run that did not complete): our next lock of this
      // item must not trust its view, so that it looks for marks.
      if (config.misfire) this.completed.forget(key);
      return { recorded };
    }
    if (markPending || !released) found = await this.readMark(zk, request).catch(() => undefined);
    // A mark still there after we consumed ours is a newer one; the same one means it is ours to run.
    if (found && consume && found.version === consume.version && found.fireTime === consume.fireTime && released) found = undefined;
    return { found, recorded };
  }

  /**
   * Whether a release multi whose answer was lost was applied. With a completion, the list tells:
   * it holds our fire exactly when the multi was applied (nobody else can add it while our lock
   * stands). Without one, `running` gone or another session's means applied; still our session's
   * is ambiguous (another execution of this process may have taken the item since).
   */
  private async resolveLostRelease(zk: ZkSessionOps, request: ExecutionRequest, key: string, completed: boolean): Promise<'applied' | 'not-applied' | 'unknown'> {
    if (completed) {
      const state = await this.readCompleted(zk, request, key);
      return state.list.includes(request.fireTime) ? 'applied' : 'not-applied';
    }
    const stat = await zk.exists(registryPaths.shardingRunning(request.job, request.item));
    return !stat || stat.ephemeralOwner !== zk.sessionId ? 'applied' : 'unknown';
  }

  /** Records (in `sharding/{i}/misfire`) the latest fire time that found the item running. */
  private async markMisfire(request: ExecutionRequest): Promise<void> {
    const path = registryPaths.shardingMisfire(request.job, request.item);
    for (let attempt = 0; attempt < 5; attempt += 1) {
      try {
        const { data, stat } = await this.ctx.zk.get(path);
        if (Number(data.toString()) >= request.fireTime) return;
        await this.ctx.zk.set(path, String(request.fireTime), stat.version);
        return;
      } catch (err) {
        if (!(err instanceof ZkError)) throw err;
        if (err.code === ErrorCodes.ZK_NO_NODE) {
          await this.ctx.zk.ensurePath(path.slice(0, path.lastIndexOf('/')));
          await this.ctx.zk.create(path, String(request.fireTime)).catch((e) => {
            if (!is(e, ErrorCodes.ZK_NODE_EXISTS)) throw e;
          });
          continue;
        }
        if (err.code !== ErrorCodes.ZK_BAD_VERSION && err.code !== ErrorCodes.ZK_NODE_EXISTS) throw err;
      }
    }
  }

  /**
   * The misfire mark left for this item, if any, without consuming it: it is deleted only together
   * with the completion of the re-run, so a holder that dies during the re-run leaves it for the
   * next one. A mark without a readable time (written by another tool) stands for the current fire.
   */
  async readMark(zk: ZkSessionOps, request: ExecutionRequest): Promise<MisfireMark | undefined> {
    try {
      const { data, stat } = await zk.get(registryPaths.shardingMisfire(request.job, request.item));
      const fireTime = Number(data.toString());
      return { fireTime: Number.isSafeInteger(fireTime) && fireTime > 0 ? fireTime : request.fireTime, version: stat.version };
    } catch (err) {
      if (is(err, ErrorCodes.ZK_NO_NODE)) return undefined;
      throw err;
    }
  }
}
