import type * as zookeeper from 'node-zookeeper-client';
import { ErrorCodes, hasCode, ShardcronError } from '../errors';
import { silentLogger, type Logger } from '../logger';
import { TypedEmitter } from '../typed-emitter';
import { backoffDelayMs, sleep } from './backoff';
import { isRetryable, toZkError, ZkError } from './zk-errors';
import { ZkMulti, type ZkOp, type ZkOpResult } from './zk-multi';
import { ZkNamespace } from './zk-namespace';
import { ZkSession } from './zk-session';
import { multiRequest, multiResults } from './zk-transaction';
import { chrootSupported, queueMulti, type MultiOpResult } from './driver';
import { toBuffer, toZkStat, type ZkCreateMode, type ZkData, type ZkStat, type ZkWatcher } from './zk-types';
import type { ZkClientEvents, ZkClientOptions, ZkSessionOps, ZkState } from './zk-client-types';

export type { ZkClientEvents, ZkClientOptions, ZkSessionOps, ZkState } from './zk-client-types';

const TRANSITIONS: Readonly<Record<ZkState, readonly ZkState[]>> = {
  idle: ['connecting', 'closed'],
  connecting: ['connected', 'closed'],
  connected: ['suspended', 'lost', 'closed'],
  suspended: ['connected', 'lost', 'closed'],
  lost: ['connected', 'closed'],
  closed: [],
};

/**
 * A promise API over node-zookeeper-client that survives its failures: it reconnects with
 * exponential backoff, tells owners about every state change, and replaces an expired session with
 * a new one (node-zookeeper-client's client is dead after expiry). Paths are namespace-relative.
 */
export class ZkClient extends TypedEmitter<ZkClientEvents> {
  private current: ZkSession | undefined;
  /** Send time of the latest request the server answered (see {@link contactDeadline}). */
  private lastAnsweredSendAt = 0;
  private heartbeat: NodeJS.Timeout | undefined;
  private stateValue: ZkState = 'idle';
  private closing: Promise<void> | undefined;
  private renewing: Promise<void> | undefined;
  /** What {@link onSession} made last (requests bound to one session, kept while it is asked for). */
  private lastSessionOps: ZkSessionOps | undefined;
  /** Aborted on close: every request waiting out a backoff before its retry listens to it (through one listener, see sleep). */
  private readonly closeController = new AbortController();
  private readonly log: Logger;
  private readonly ns: ZkNamespace;

  constructor(readonly options: ZkClientOptions) {
    const log = (options.logger ?? silentLogger).child({ component: 'zk', ns: options.namespace });
    super(log);
    this.log = log;
    const chrooted = chrootSupported();
    if (!chrooted) log.warn('node-zookeeper-client internals changed: paths keep the namespace root (more memory per watch)');
    this.ns = new ZkNamespace(options.namespace, Boolean(options.digest), log, chrooted);
  }

  get state(): ZkState {
    return this.stateValue;
  }

  /** Hex id of the live session ('0' before the first connect). */
  get sessionId(): string {
    return this.current?.sessionId ?? '0';
  }

  /**
   * The earliest moment the server could expire our session: the send time of the last request it
   * answered plus the session timeout (it cannot have heard from us before we sent). Owners of
   * ephemeral locks stop acting on them before this, whatever the connection state says, which
   * also covers a process that was paused (SIGSTOP, GC, VM freeze) and does not know it yet.
   */
  contactDeadline(): number {
    return this.lastAnsweredSendAt + this.negotiatedSessionTimeoutMs;
  }

  /** The timeout the server granted, which may differ from the one asked for. */
  get negotiatedSessionTimeoutMs(): number {
    return this.current?.negotiatedTimeoutMs ?? this.options.sessionTimeoutMs;
  }

  /** Connects (retrying with backoff up to `retry.maxRetries`) and ensures the namespace root. */
  async start(): Promise<this> {
    this.transition('connecting');
    try {
      this.current = await this.openSession(this.options.retry.maxRetries);
    } catch (err) {
      await this.close();
      throw err;
    }
    this.lastAnsweredSendAt = Date.now();
    this.transition('connected');
    this.emit('connected', { sessionId: this.sessionId });
    this.startHeartbeat();
    return this;
  }

  close(): Promise<void> {
    return (this.closing ??= this.doClose());
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  // ---- operations -------------------------------------------------------------------------

  /** Creates a node; returns its path (with the sequence suffix for sequential modes). */
  async create(path: string, data?: ZkData, mode: ZkCreateMode = 'persistent'): Promise<string> {
    // A create lost in flight may have happened. Retrying a plain create then fails with
    // NODE_EXISTS, which callers handle; retrying a sequential one would make a second node,
    // so those are not retried (callers find their node by its data, as Curator's protected mode).
    const retry = !mode.endsWith('_sequential');
    const created = await this.run(
      'create',
      path,
      (raw, cb) => raw.create(this.ns.abs(path), toBuffer(data) ?? Buffer.alloc(0), this.ns.acls, this.ns.mode(mode), cb),
      retry,
    );
    return this.ns.rel(created as string);
  }

  /**
   * Creates a node unless it exists; false when it did. Its parents (persistent, empty) are made
   * only when the create finds one missing: one request when they exist, as they almost always
   * do, where {@link ensurePath} sends a create per level of the path.
   */
  async createUnlessExists(path: string, data?: ZkData, mode: ZkCreateMode = 'persistent'): Promise<boolean> {
    for (let attempt = 0; ; attempt += 1) {
      try {
        await this.create(path, data, mode);
        return true;
      } catch (err) {
        if (hasCode(err, ErrorCodes.ZK_NODE_EXISTS)) return false;
        if (!hasCode(err, ErrorCodes.ZK_NO_NODE) || attempt > 0) throw err;
      }
      await this.ensurePath(path.slice(0, path.lastIndexOf('/')));
    }
  }

  /** Creates `path` and any missing parents (persistent, empty); existing nodes are left alone. */
  async ensurePath(path: string): Promise<void> {
    await this.run('ensurePath', path, (raw, cb) => raw.mkdirp(this.ns.abs(path), Buffer.alloc(0), this.ns.acls, this.ns.mode('persistent'), cb));
  }

  /** Data and stat of a node; throws ZK_NO_NODE when absent. An optional one-shot watcher. */
  get(path: string, watcher?: ZkWatcher): Promise<{ data: Buffer; stat: ZkStat }> {
    return this.getOn(path, watcher, true);
  }

  private getOn(path: string, watcher: ZkWatcher | undefined, retry: boolean, boundTo?: string): Promise<{ data: Buffer; stat: ZkStat }> {
    return this.run(
      'get',
      path,
      (raw, cb) => {
        const done = (err: Error | zookeeper.Exception | null, data: Buffer, stat: zookeeper.Stat) =>
          cb(err, err ? undefined : { data: data ?? Buffer.alloc(0), stat: toZkStat(stat) });
        if (watcher) raw.getData(this.ns.abs(path), this.ns.watcher(watcher), done);
        else raw.getData(this.ns.abs(path), done);
      },
      retry,
      boundTo,
    );
  }

  /** Node data as UTF-8 text, or undefined when the node does not exist. */
  async getText(path: string): Promise<string | undefined> {
    try {
      return (await this.get(path)).data.toString('utf8');
    } catch (err) {
      if (err instanceof ZkError && err.code === ErrorCodes.ZK_NO_NODE) return undefined;
      throw err;
    }
  }

  /** Sets data; `version` -1 means any version. Returns the new stat. */
  async set(path: string, data: ZkData, version = -1): Promise<ZkStat> {
    return this.run('set', path, (raw, cb) =>
      raw.setData(this.ns.abs(path), toBuffer(data) ?? Buffer.alloc(0), version, (err, stat) => cb(err, err ? undefined : toZkStat(stat))),
    );
  }

  /** Deletes a leaf node; `version` -1 means any version. */
  async delete(path: string, version = -1): Promise<void> {
    await this.run('delete', path, (raw, cb) => raw.remove(this.ns.abs(path), version, cb));
  }

  /** Deletes a node and everything under it; a missing node is not an error. */
  async deleteRecursive(path: string): Promise<void> {
    // Children can appear while we walk (a worker registering); retry the walk a few times.
    for (let attempt = 0; ; attempt += 1) {
      try {
        const kids = await this.children(path);
        for (const kid of kids) await this.deleteRecursive(`${path === '/' ? '' : path}/${kid}`);
        if (path !== '/') await this.delete(path);
        return;
      } catch (err) {
        if (err instanceof ZkError && err.code === ErrorCodes.ZK_NO_NODE) return;
        if (err instanceof ZkError && err.code === ErrorCodes.ZK_NOT_EMPTY && attempt < 5) continue;
        throw err;
      }
    }
  }

  /** Child names (not paths); throws ZK_NO_NODE when the parent is absent. */
  async children(path: string, watcher?: ZkWatcher): Promise<string[]> {
    return this.childrenOn(path, watcher, true);
  }

  private childrenOn(path: string, watcher: ZkWatcher | undefined, retry: boolean, boundTo?: string): Promise<string[]> {
    return this.run(
      'children',
      path,
      (raw, cb) => {
        const done = (err: Error | zookeeper.Exception | null, kids: string[]) => cb(err, err ? undefined : kids);
        if (watcher) raw.getChildren(this.ns.abs(path), this.ns.watcher(watcher), done);
        else raw.getChildren(this.ns.abs(path), done);
      },
      retry,
      boundTo,
    );
  }

  /** Stat of a node or null; with a watcher, fires on creation as well as change or deletion. */
  async exists(path: string, watcher?: ZkWatcher): Promise<ZkStat | null> {
    return this.existsOn(path, watcher, true);
  }

  private existsOn(path: string, watcher: ZkWatcher | undefined, retry: boolean, boundTo?: string): Promise<ZkStat | null> {
    return this.run(
      'exists',
      path,
      (raw, cb) => {
        const done = (err: Error | zookeeper.Exception | null, stat: zookeeper.Stat) => cb(err, err ? undefined : stat ? toZkStat(stat) : null);
        if (watcher) raw.exists(this.ns.abs(path), this.ns.watcher(watcher), done);
        else raw.exists(this.ns.abs(path), done);
      },
      retry,
      boundTo,
    );
  }

  /** An atomic transaction. */
  multi(): ZkMulti {
    return new ZkMulti((ops, fenced) => this.commit(ops, fenced));
  }

  /**
   * A transaction that first checks `fence` still has `version`. If the check fails, the
   * transaction fails with ZK_FENCE_LOST: whoever owned the fence node is no longer authoritative.
   */
  fencedMulti(fence: { path: string; version: number }): ZkMulti {
    return new ZkMulti((ops, fenced) => this.commit(ops, fenced), true).check(fence.path, fence.version);
  }

  /**
   * Requests bound to session `sessionId`, normally the current {@link sessionId} captured before
   * taking an ephemeral lock: see {@link ZkSessionOps}.
   */
  onSession(sessionId: string): ZkSessionOps {
    // The same object for the same session: a worker's item leases each keep theirs, 10,000 of
    // them at a time (four closures, a context and an object each) where one does.
    if (this.lastSessionOps?.sessionId === sessionId) return this.lastSessionOps;
    const ops: ZkSessionOps = Object.freeze<ZkSessionOps>({
      sessionId,
      get: (path) => this.getOn(path, undefined, false, sessionId),
      exists: (path) => this.existsOn(path, undefined, false, sessionId),
      children: (path) => this.childrenOn(path, undefined, false, sessionId),
      multi: () => new ZkMulti((ops, fenced) => this.commit(ops, fenced, sessionId)),
    });
    this.lastSessionOps = ops;
    return ops;
  }

  // ---- internals --------------------------------------------------------------------------

  private async commit(ops: readonly ZkOp[], fenced: boolean, boundTo?: string): Promise<ZkOpResult[]> {
    if (ops.length === 0) return [];
    // A multi is not idempotent (creates, sequential nodes): never retried here.
    const request = multiRequest(this.ns, ops);
    const results = await this.run<MultiOpResult[]>('multi', undefined, (raw, cb) => queueMulti(raw, request, cb), false, boundTo);
    return multiResults(results, ops, fenced, this.ns);
  }

  /**
   * Runs one request on the live session. Waits (up to connectTimeoutMs) for a connection when
   * suspended, and retries connection-loss failures with backoff when `retry` is set. With
   * `boundTo`, only on that session: ZK_SESSION_EXPIRED once the client has moved to another one.
   */
  private async run<T>(
    op: string,
    path: string | undefined,
    call: (raw: zookeeper.Client, cb: (err: unknown, value?: unknown) => void) => void,
    retry = true,
    boundTo?: string,
  ): Promise<T> {
    for (let attempt = 0; ; attempt += 1) {
      const session = await this.awaitConnected(op, path);
      if (boundTo !== undefined && session.sessionId !== boundTo) {
        throw new ZkError(ErrorCodes.ZK_SESSION_EXPIRED, -112, op, path, { boundTo, currentSession: session.sessionId });
      }
      const sentAt = Date.now();
      try {
        return await session.request<T>(
          (raw, cb) =>
            call(raw, (err, value) => {
              // Any answer, even an error code, proves the server heard us at sentAt or later.
              if (session === this.current && (!err || !isRetryable(toZkError(err, op, path)))) this.noteContact(sentAt);
              cb(err ? toZkError(err, op, path) : null, value);
            }),
          () => new ZkError(ErrorCodes.ZK_SESSION_EXPIRED, -112, op, path, { sessionId: session.sessionId, closed: true }),
        );
      } catch (err) {
        if (!retry || !isRetryable(err) || attempt >= this.options.retry.maxRetries || this.closing) throw err;
        await sleep(backoffDelayMs(attempt, this.options.retry), this.closeController.signal).catch(() => undefined);
      }
    }
  }

  private async awaitConnected(op: string, path: string | undefined): Promise<ZkSession> {
    if (this.stateValue === 'connected' && this.current) return this.current;
    if (this.stateValue === 'closed' || this.closing) {
      throw new ShardcronError(ErrorCodes.CLOSED, `ZooKeeper client is closed; cannot ${op} ${path ?? ''}`.trim());
    }
    const deadline = this.options.connectTimeoutMs;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        off();
        reject(new ZkError(ErrorCodes.ZK_CONNECTION_LOSS, -4, op, path, { waitedMs: deadline, state: this.stateValue }));
      }, deadline);
      const off = this.on('state', ({ to }) => {
        if (to !== 'connected' && to !== 'closed') return;
        clearTimeout(timer);
        off();
        if (to === 'connected') resolve();
        else reject(new ShardcronError(ErrorCodes.CLOSED, `ZooKeeper client closed while waiting to ${op}`));
      });
    });
    return this.current!;
  }

  /** Opens a new session, retrying up to `maxRetries` times (Infinity after a loss). */
  private async openSession(maxRetries: number): Promise<ZkSession> {
    let lastError: unknown;
    for (let attempt = 0; attempt <= maxRetries && !this.closing; attempt += 1) {
      const session = new ZkSession(this.options, this.log, {
        onDisconnected: (s) => this.onDisconnected(s),
        onReconnected: (s) => this.onReconnected(s),
        onExpired: (s) => this.onSessionGone(s, 'expired'),
      });
      try {
        await session.open(this.options.connectTimeoutMs);
        await session.mkdirp(this.ns.root, this.ns.acls);
        if (this.ns.chrooted) session.enterChroot(this.ns.root);
        return session;
      } catch (err) {
        lastError = err;
        session.close();
        this.log.warn({ err, attempt }, 'ZooKeeper connection attempt failed');
        if (attempt < maxRetries) {
          await sleep(backoffDelayMs(attempt, this.options.retry), this.closeController.signal).catch(() => undefined);
        }
      }
    }
    throw new ShardcronError(
      ErrorCodes.ZK_CONNECT_FAILED,
      `Cannot connect to ZooKeeper at ${this.options.connectionString} (namespace ${this.options.namespace}) ` +
        `after ${maxRetries + 1} attempt(s) of ${this.options.connectTimeoutMs} ms. Check SHARDCRON_ZK and that ZooKeeper is running.`,
      { connectionString: this.options.connectionString },
      { cause: lastError },
    );
  }

  private onDisconnected(session: ZkSession): void {
    if (session !== this.current || this.stateValue !== 'connected') return;
    this.transition('suspended');
    this.emit('suspended', { sessionId: session.sessionId, at: Date.now() });
    // The server expires the session one session timeout after its last contact with us. Past
    // that we cannot know our ephemeral nodes still exist, so we treat the session as lost
    // ourselves (Curator's behaviour) instead of waiting for a reconnect that may take forever.
    session.armLossTimer(() => this.onSessionGone(session, 'timeout'));
  }

  private onReconnected(session: ZkSession): void {
    if (session !== this.current || this.stateValue !== 'suspended') return;
    session.disarmLossTimer();
    this.transition('connected');
    this.emit('reconnected', { sessionId: session.sessionId });
  }

  private onSessionGone(session: ZkSession, reason: 'expired' | 'timeout'): void {
    if (session !== this.current || this.closing || this.renewing) return;
    if (this.stateValue !== 'connected' && this.stateValue !== 'suspended') return;
    this.transition('lost');
    this.emit('lost', { sessionId: session.sessionId, reason });
    session.close();
    this.renewing = this.renew(session.sessionId).finally(() => (this.renewing = undefined));
  }

  private async renew(previousSessionId: string): Promise<void> {
    try {
      const session = await this.openSession(Number.POSITIVE_INFINITY);
      if (this.closing) return session.close();
      this.current = session;
      this.lastAnsweredSendAt = Date.now();
      this.transition('connected');
      this.emit('session:renewed', { sessionId: session.sessionId, previousSessionId });
    } catch (err) {
      if (!this.closing) this.log.error({ err }, 'could not renew the ZooKeeper session');
    }
  }

  private transition(to: ZkState): void {
    const from = this.stateValue;
    if (from === to) return;
    if (!TRANSITIONS[from].includes(to)) {
      this.log.warn({ from, to }, 'ignored invalid ZooKeeper state transition');
      return;
    }
    this.stateValue = to;
    this.log.info({ from, to, sessionId: this.sessionId }, 'ZooKeeper connection state');
    this.emit('state', { from, to });
  }

  private noteContact(sentAt: number): void {
    if (sentAt > this.lastAnsweredSendAt) this.lastAnsweredSendAt = sentAt;
  }

  /**
   * A cheap read every third of the session timeout keeps {@link contactDeadline} fresh even when
   * the owner issues no request (node-zookeeper-client's own pings are not observable).
   */
  private startHeartbeat(): void {
    const beat = () => {
      if (this.closing) return;
      if (this.stateValue === 'connected') void this.exists('/').catch(() => undefined);
      this.heartbeat = setTimeout(beat, Math.max(100, Math.floor(this.negotiatedSessionTimeoutMs / 3)));
      this.heartbeat.unref();
    };
    beat();
  }

  private async doClose(): Promise<void> {
    if (this.heartbeat) clearTimeout(this.heartbeat);
    this.closeController.abort(new ShardcronError(ErrorCodes.CLOSED, 'ZooKeeper client closed'));
    const session = this.current;
    this.transition('closed');
    if (session) await session.closeAndWait();
    this.emit('closed', {});
    this.removeAllListeners();
  }
}
