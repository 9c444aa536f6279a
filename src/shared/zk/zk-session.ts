import type { Socket } from 'node:net';
import * as zookeeper from 'node-zookeeper-client';
import { ErrorCodes, ShardcronError } from '../errors';
import type { Logger } from '../logger';
import { toZkError, ZkError } from './zk-errors';
import { enterChroot, installDriverPatches } from './driver';
import { sessionIdHex } from './zk-types';

interface SessionHandlers {
  onDisconnected(session: ZkSession): void;
  onReconnected(session: ZkSession): void;
  onExpired(session: ZkSession): void;
}

interface SessionOptions {
  connectionString: string;
  sessionTimeoutMs: number;
  digest?: { user: string; password: string };
}

/**
 * One ZooKeeper session: one node-zookeeper-client instance from connect to close. The client
 * object cannot outlive its session, so {@link ZkClient} builds a new ZkSession after a loss and
 * ignores events from old ones.
 */
export class ZkSession {
  readonly raw: zookeeper.Client;
  private opened = false;
  private closed = false;
  private lossTimer: NodeJS.Timeout | undefined;
  /**
   * Requests sent on this session and not answered yet, each with a way to fail it. A client
   * closed while it has no connection does not always call back what it still holds, and a caller
   * waiting on such a request (a lock release) would wait forever.
   */
  private readonly inFlight = new Set<(err: Error) => void>();
  /** The socket corked until the end of the current turn, if any. */
  private corked: Socket | undefined;

  constructor(
    options: SessionOptions,
    private readonly log: Logger,
    private readonly handlers: SessionHandlers,
  ) {
    // node-zookeeper-client retries a lost connection on its own across the server list;
    // spinDelay is the pause between servers. We keep it short so a restart is noticed fast.
    this.raw = zookeeper.createClient(options.connectionString, {
      sessionTimeout: options.sessionTimeoutMs,
      spinDelay: 200,
      retries: 0,
    });
    const skipped = installDriverPatches(this.raw);
    if (skipped.length > 0) log.warn({ skipped }, 'node-zookeeper-client internals changed: keeping its own code for these');
    if (options.digest) {
      this.raw.addAuthInfo('digest', Buffer.from(`${options.digest.user}:${options.digest.password}`));
    }
  }

  /** Known once connected; it never changes for this object (see the class comment). */
  private knownSessionId: string | undefined;

  get sessionId(): string {
    if (this.knownSessionId !== undefined) return this.knownSessionId;
    // The library copies the id into a new buffer on every call, and workers ask at every execution.
    const id = sessionIdHex(this.raw.getSessionId());
    if (this.opened && id !== '0') this.knownSessionId = id;
    return id;
  }

  get negotiatedTimeoutMs(): number {
    return this.raw.getSessionTimeout();
  }

  /** Connects; rejects after `timeoutMs` or when the server refuses the credentials. */
  open(timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        cleanup();
        reject(new ShardcronError(ErrorCodes.ZK_CONNECT_FAILED, `no ZooKeeper connection within ${timeoutMs} ms`));
      }, timeoutMs);
      const onConnected = () => {
        cleanup();
        this.opened = true;
        this.wire();
        resolve();
      };
      const onAuthFailed = () => {
        cleanup();
        reject(new ShardcronError(ErrorCodes.ZK_AUTH_FAILED, 'ZooKeeper refused the digest credentials (SHARDCRON_ZK_DIGEST)'));
      };
      const cleanup = () => {
        clearTimeout(timer);
        this.raw.removeListener('connected', onConnected);
        this.raw.removeListener('authenticationFailed', onAuthFailed);
      };
      this.raw.once('connected', onConnected);
      this.raw.once('authenticationFailed', onAuthFailed);
      this.raw.connect();
    });
  }

  /** mkdirp on this session (used for the namespace root before the session is handed out). */
  mkdirp(path: string, acls: zookeeper.ACL[]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.raw.mkdirp(path, Buffer.alloc(0), acls, zookeeper.CreateMode.PERSISTENT, (err) =>
        err ? reject(toZkError(err, 'ensurePath', path)) : resolve(),
      );
    });
  }

  /**
   * Chroots this session's connection to `root` (which must exist) from now on: paths of later
   * requests and of what they read back are relative to it (driver/chroot.ts; only where
   * `chrootSupported()`).
   */
  enterChroot(root: string): void {
    enterChroot(this.raw, root);
  }

  armLossTimer(onLoss: () => void): void {
    this.disarmLossTimer();
    this.lossTimer = setTimeout(onLoss, this.negotiatedTimeoutMs);
  }

  disarmLossTimer(): void {
    if (this.lossTimer) clearTimeout(this.lossTimer);
    this.lossTimer = undefined;
  }

  /**
   * Sends one request on this session: `call` gets the raw client and a callback; the returned
   * promise settles with that callback, or fails with ZK_SESSION_EXPIRED when the session is
   * closed first (or already was).
   */
  request<T>(call: (raw: zookeeper.Client, cb: (err: unknown, value?: unknown) => void) => void, expired: () => Error): Promise<T> {
    if (this.closed) return Promise.reject(expired());
    this.corkForTurn();
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const fail = (err: Error) => {
        if (settled) return;
        settled = true;
        this.inFlight.delete(fail);
        reject(err);
      };
      this.inFlight.add(fail);
      call(this.raw, (err, value) => {
        if (settled) return;
        settled = true;
        this.inFlight.delete(fail);
        if (err) reject(err);
        else resolve(value as T);
      });
    });
  }

  /**
   * node-zookeeper-client writes each request to its socket as it is queued: a worker that sends
   * a batch's multi and the reads behind it paid one write system call per request. Corking the
   * connection's socket until the end of the current turn sends them in one write; requests keep
   * their order. The socket is the client's own (undocumented) field: without it, nothing changes.
   */
  private corkForTurn(): void {
    if (this.corked) return;
    const socket = (this.raw as unknown as { connectionManager?: { socket?: Socket } }).connectionManager?.socket;
    if (!socket || typeof socket.cork !== 'function' || socket.destroyed) return;
    socket.cork();
    this.corked = socket;
    process.nextTick(() => {
      this.corked = undefined;
      socket.uncork();
    });
  }

  /** Fails every request still waiting for an answer on this session. */
  private failInFlight(): void {
    const expired = new ZkError(ErrorCodes.ZK_SESSION_EXPIRED, -112, 'request', undefined, { sessionId: this.sessionId, closed: true });
    for (const fail of [...this.inFlight]) fail(expired);
  }

  /** Closes without waiting (the server may be unreachable). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.disarmLossTimer();
    this.raw.removeAllListeners();
    // Swallow late 'error'-like emissions from a client we no longer listen to.
    this.raw.on('state', () => undefined);
    try {
      this.raw.close();
    } catch (err) {
      this.log.debug({ err }, 'closing a ZooKeeper client threw; ignored');
    }
    this.failInFlight();
  }

  /** Closes and waits (bounded) for the close-session request to reach the server, so that our
   *  ephemeral nodes vanish now rather than one session timeout later. */
  async closeAndWait(maxWaitMs = 2000): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.disarmLossTimer();
    const connected = this.opened && this.raw.getState() === zookeeper.State.SYNC_CONNECTED;
    const gone = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, connected ? maxWaitMs : 0);
      this.raw.once('disconnected', () => {
        clearTimeout(timer);
        resolve();
      });
    });
    try {
      this.raw.close();
    } catch (err) {
      this.log.debug({ err }, 'closing a ZooKeeper client threw; ignored');
    }
    await gone;
    this.failInFlight();
    this.raw.removeAllListeners();
  }

  private wire(): void {
    this.raw.on('disconnected', () => !this.closed && this.handlers.onDisconnected(this));
    this.raw.on('connected', () => !this.closed && this.handlers.onReconnected(this));
    this.raw.on('expired', () => !this.closed && this.handlers.onExpired(this));
  }
}
