import * as zookeeper from 'node-zookeeper-client';
import { ErrorCodes, ShardcronError } from '../errors';
import type { Logger } from '../logger';
import type { ZkCreateMode, ZkWatcher } from './zk-types';

const MODES: Readonly<Record<ZkCreateMode, number>> = {
  persistent: zookeeper.CreateMode.PERSISTENT,
  ephemeral: zookeeper.CreateMode.EPHEMERAL,
  persistent_sequential: zookeeper.CreateMode.PERSISTENT_SEQUENTIAL,
  ephemeral_sequential: zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL,
};

/**
 * The chroot a {@link ZkClient} works in, and the translation between its namespace-relative API
 * and node-zookeeper-client's requests: absolute paths, the ACL every node gets, numeric create
 * modes and raw watch events.
 */
export class ZkNamespace {
  /** Absolute path of the namespace root, `/{namespace}`. */
  readonly root: string;
  /** The ACL every node of the namespace is created with. */
  readonly acls: zookeeper.ACL[];
  private readonly rawWatchers = new WeakMap<ZkWatcher, (event: zookeeper.Event) => void>();
  /**
   * @param chrooted whether every session's connection takes the root as its chroot
   *   (driver/chroot.ts), so that the library adds the root to paths itself; then {@link abs} and
   *   {@link rel} change nothing.
   */
  constructor(namespace: string, withDigest: boolean, private readonly log: Logger, readonly chrooted: boolean) {
    this.root = `/${namespace}`;
    // Creator-only ACL with a digest, as ElasticJob does: a client without the credentials can
    // neither read nor write the namespace. The typings omit the ACL constants, hence the cast.
    const constants = zookeeper.ACL as unknown as Record<'CREATOR_ALL_ACL' | 'OPEN_ACL_UNSAFE', zookeeper.ACL[]>;
    this.acls = withDigest ? constants.CREATOR_ALL_ACL : constants.OPEN_ACL_UNSAFE;
  }

  /**
   * The path to hand the library for a namespace-relative one: itself on a chrooted connection, else
   * absolute. Throws ZK_BAD_ARGUMENTS unless it starts with '/'.
   */
  abs(path: string): string {
    if (!path.startsWith('/')) {
      throw new ShardcronError(ErrorCodes.ZK_BAD_ARGUMENTS, `ZooKeeper path must start with '/': ${JSON.stringify(path)}`);
    }
    if (this.chrooted) return path;
    // A join, not `+`: one flat string, not a cons string of two. The watch registry keeps the path
    // of every watch (a leader has eight per job), and a cons string costs 32 bytes more once flattened.
    return path === '/' ? this.root : [this.root, path].join('');
  }

  /**
   * The namespace-relative path of one the library handed back: itself on a chrooted connection,
   * else the absolute path made relative (a path outside the namespace is returned as is).
   */
  rel(path: string): string {
    if (this.chrooted) return path;
    if (path === this.root) return '/';
    return path.startsWith(this.root + '/') ? path.slice(this.root.length) : path;
  }

  /** node-zookeeper-client's number for a creation mode. */
  mode(mode: ZkCreateMode): number {
    return MODES[mode];
  }

  /**
   * The raw watcher that hands `watcher` a named event with a relative path; one per `watcher`,
   * so node-zookeeper-client, which skips a watcher already registered on a path only when it is
   * the same function, does not pile up a copy (and a second notification) at every re-read of a
   * path whose watch is still armed. A watcher that throws is logged and ignored: the exception
   * would otherwise surface in the client's event loop.
   */
  watcher(watcher: ZkWatcher): (event: zookeeper.Event) => void {
    let raw = this.rawWatchers.get(watcher);
    if (!raw) {
      // A bound method, not a closure: a leader keeps about seven of these per job. (A method, not
      // a module function: tsx renames functions, and a bound renamed function gets a property
      // array of its own, 250 bytes.)
      raw = this.deliver.bind(this, watcher);
      this.rawWatchers.set(watcher, raw);
    }
    return raw;
  }

  private deliver(watcher: ZkWatcher, event: zookeeper.Event): void {
    const type = event.getType();
    const kind =
      type === zookeeper.Event.NODE_CREATED ? 'created'
      : type === zookeeper.Event.NODE_DELETED ? 'deleted'
      : type === zookeeper.Event.NODE_DATA_CHANGED ? 'dataChanged'
      : type === zookeeper.Event.NODE_CHILDREN_CHANGED ? 'childrenChanged'
      : 'other';
    try {
      watcher({ type: kind, path: this.rel(event.getPath()) });
    } catch (err) {
      this.log.error({ err }, 'ZooKeeper watcher threw; ignored');
    }
  }
}
