/** The options, states, events and session-bound requests of ZkClient (zk-client.ts). */
import type { Logger } from '../logger';
import type { BackoffOptions } from './backoff';
import type { ZkMulti } from './zk-multi';
import type { ZkStat } from './zk-types';

/** How to reach ZooKeeper and how hard to try. */
export interface ZkClientOptions {
  /** `host:port[,host:port...]`, no chroot: the namespace is the chroot. */
  connectionString: string;
  /** Every path is relative to `/{namespace}`; the root node is created on connect. */
  namespace: string;
  sessionTimeoutMs: number;
  /** How long one connection attempt (and an operation waiting for a connection) may take. */
  connectTimeoutMs: number;
  retry: BackoffOptions;
  /** `digest` credentials; when set, every node is created with a creator-only ACL. */
  digest?: { user: string; password: string };
  logger?: Logger;
}

/**
 * Connection states. `suspended`: the connection dropped, the session may still live (stop
 * acting on ownership). `lost`: the session is gone (expired, or no contact for a whole session
 * timeout); a new session is being built and `session:renewed` follows.
 */
export type ZkState = 'idle' | 'connecting' | 'connected' | 'suspended' | 'lost' | 'closed';

/** Events of {@link ZkClient}, one payload object each. */
export interface ZkClientEvents {
  [event: string]: object;
  state: { from: ZkState; to: ZkState };
  connected: { sessionId: string };
  suspended: { sessionId: string; at: number };
  reconnected: { sessionId: string };
  lost: { sessionId: string; reason: 'expired' | 'timeout' };
  'session:renewed': { sessionId: string; previousSessionId: string };
  closed: Record<string, never>;
}

/**
 * Requests that go out only on one session, each sent once (never retried). Once the client has
 * moved to another session they fail with ZK_SESSION_EXPIRED, as the server answers for an expired
 * one. So an ephemeral node created through them belongs to that session, and a later write through
 * them that touches the node can only reach it while that session, and so the node, still lives:
 * a live session's ephemeral node disappears only by an explicit delete. Requests issued in one
 * synchronous run reach the server in that order on one connection, and ZooKeeper answers a
 * session's requests in order: a read issued right after a write sees the write (or fails with it).
 */
export interface ZkSessionOps {
  readonly sessionId: string;
  get(path: string): Promise<{ data: Buffer; stat: ZkStat }>;
  exists(path: string): Promise<ZkStat | null>;
  /** Child names; a way to learn whether a node exists that costs no error answer when it does not. */
  children(path: string): Promise<string[]>;
  multi(): ZkMulti;
}
