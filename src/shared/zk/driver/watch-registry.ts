import * as zookeeper from 'node-zookeeper-client';

type RawWatcher = (event: zookeeper.Event) => void;
/** One watcher (the usual case) or several, in registration order. */
type Watchers = RawWatcher | RawWatcher[];

/** What the client's connection hands {@link WatchRegistry.emit}: a deserialised WatcherEvent. */
interface WatcherEvent {
  type: number;
  state: number;
  path: string;
}

const { NODE_CREATED, NODE_DELETED, NODE_DATA_CHANGED, NODE_CHILDREN_CHANGED } = zookeeper.Event;
const createEvent = (zookeeper.Event as unknown as { create(event: WatcherEvent): zookeeper.Event }).create;

/**
 * Path bytes in one SetWatches request at most: ZooKeeper's own client sends its watches in
 * requests of 128 KB (ClientCnxn's SET_WATCHES_MAX_LENGTH), since a server closes the connection on
 * a request larger than its `jute.maxbuffer` (1 MB by default).
 */
export const SET_WATCHES_BYTES = 128 * 1024;

/** The watched paths of one SetWatches request. */
export interface WatchChunk {
  data: string[];
  exist: string[];
  child: string[];
}

/**
 * The one-shot watches of a client, by kind and path: a drop-in for node-zookeeper-client's
 * WatcherManager, which its connection calls to register a watch after a successful read, to list
 * the watched paths when it re-arms them on a reconnect (SetWatches), and to deliver a
 * notification. That one keeps an EventEmitter per watched path, with a dictionary of listeners
 * and a wrapper and a bound function per registration, and a leader keeps eight watches per job:
 * with this registry instead, a 10,000-job leader's live heap went from 148 to 124 MB. Here a watch
 * is a map entry.
 * Delivery follows the library's rules: a data change or creation fires the data and existence
 * watches of the path, a deletion the data and child watches, a child change the child watches;
 * each fires once, and a function registered twice on the same path and kind fires once.
 */
export class WatchRegistry {
  private readonly data = new Map<string, Watchers>();
  private readonly child = new Map<string, Watchers>();
  private readonly existence = new Map<string, Watchers>();
  /** While set, {@link isEmpty} says yes: the library's own single SetWatches is not sent. */
  private rearming = false;

  registerDataWatcher(path: string, watcher: RawWatcher): void {
    add(this.data, path, watcher);
  }

  registerChildWatcher(path: string, watcher: RawWatcher): void {
    add(this.child, path, watcher);
  }

  registerExistenceWatcher(path: string, watcher: RawWatcher): void {
    add(this.existence, path, watcher);
  }

  getDataWatcherPaths(): string[] {
    return [...this.data.keys()];
  }

  getChildWatcherPaths(): string[] {
    return [...this.child.keys()];
  }

  getExistenceWatcherPaths(): string[] {
    return [...this.existence.keys()];
  }

  isEmpty(): boolean {
    return this.rearming || (this.data.size === 0 && this.child.size === 0 && this.existence.size === 0);
  }

  /** Runs `fn` (the library's connect handler) with the watches hidden from it. */
  hidingWatches(fn: () => void): void {
    this.rearming = true;
    try {
      fn();
    } finally {
      this.rearming = false;
    }
  }

  /**
   * The watched paths in chunks of at most `maxBytes` (each path counted with its length prefix
   * and the `prefixBytes` of the chroot the library adds), data, then existence, then child watches.
   */
  chunks(maxBytes = SET_WATCHES_BYTES, prefixBytes = 0): WatchChunk[] {
    const chunks: WatchChunk[] = [];
    let current: WatchChunk = { data: [], exist: [], child: [] };
    let bytes = 0;
    const kinds: Array<[Map<string, Watchers>, keyof WatchChunk]> = [[this.data, 'data'], [this.existence, 'exist'], [this.child, 'child']];
    for (const [map, kind] of kinds) {
      for (const path of map.keys()) {
        const size = 4 + prefixBytes + Buffer.byteLength(path);
        if (bytes > 0 && bytes + size > maxBytes) {
          chunks.push(current);
          current = { data: [], exist: [], child: [] };
          bytes = 0;
        }
        current[kind].push(path);
        bytes += size;
      }
    }
    if (bytes > 0) chunks.push(current);
    return chunks;
  }

  emit(watcherEvent: WatcherEvent): void {
    const { type, path } = watcherEvent;
    const fired: Watchers[] = [];
    const take = (map: Map<string, Watchers>) => {
      const watchers = map.get(path);
      if (watchers === undefined) return;
      map.delete(path);
      fired.push(watchers);
    };
    if (type === NODE_DATA_CHANGED || type === NODE_CREATED) {
      take(this.data);
      take(this.existence);
    } else if (type === NODE_CHILDREN_CHANGED) {
      take(this.child);
    } else if (type === NODE_DELETED) {
      take(this.data);
      take(this.child);
    } else {
      throw new Error(`Unknown event type: ${type}`);
    }
    if (fired.length === 0) return;
    const event = createEvent(watcherEvent);
    for (const watchers of fired) {
      if (typeof watchers === 'function') watchers(event);
      else for (const watcher of watchers) watcher(event);
    }
  }
}

function add(map: Map<string, Watchers>, path: string, watcher: RawWatcher): void {
  if (typeof watcher !== 'function') throw new Error('watcher must be a valid function.');
  const present = map.get(path);
  if (present === undefined) map.set(path, watcher);
  else if (typeof present === 'function') {
    if (present !== watcher) map.set(path, [present, watcher]);
  } else if (!present.includes(watcher)) present.push(watcher);
}

/** The parts of the library's connection the patch uses. */
interface Connection {
  watcherManager?: object;
  chrootPath?: string;
  zxid?: unknown;
  onSocketConnected?: () => void;
  queue?: (request: unknown) => void;
}

/** The library's protocol records (lib/jute), for the SetWatches requests. */
interface Jute {
  OP_CODES: { SET_WATCHES: number };
  XID_SET_WATCHES: number;
  Request: new (header: unknown, payload: unknown) => unknown;
  protocol: {
    RequestHeader: new () => { type: number; xid: number };
    SetWatches: new () => { relativeZxid: unknown; dataWatches: string[]; existWatches: string[]; childWatches: string[] };
  };
}

/**
 * Patch: puts a {@link WatchRegistry} in place of `client`'s WatcherManager, before any watch
 * exists, and re-arms the watches after a reconnect in requests of {@link SET_WATCHES_BYTES}.
 * - The library keeps an EventEmitter per watched path (24 MB for a leader's eight watches per job
 *   at 10,000 jobs).
 * - The library re-arms every watch in one SetWatches request. A leader of 3,500 jobs watches
 *   1 MB of paths (bench/tools/watch-bytes.ts), more than a server accepts in one request: the
 *   server refuses it, and after a reconnect no watch fired again
 *   (test/integration/zk-faults.test.ts, "SetWatches goes in chunks").
 * Tests: test/unit/watch-registry.test.ts and that one. Returns false, leaving the library's own,
 * if the client's internals do not look as expected (another version of node-zookeeper-client).
 */
export function installWatchRegistry(client: zookeeper.Client): boolean {
  const connection = (client as unknown as { connectionManager?: Connection }).connectionManager;
  const current = connection?.watcherManager as Record<string, unknown> | undefined;
  const methods = ['registerDataWatcher', 'registerChildWatcher', 'registerExistenceWatcher', 'getDataWatcherPaths', 'getChildWatcherPaths', 'getExistenceWatcherPaths', 'isEmpty', 'emit'];
  if (!connection || !current || !methods.every((m) => typeof current[m] === 'function')) return false;
  const onConnected = connection.onSocketConnected;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const jute = require('node-zookeeper-client/lib/jute') as Partial<Jute>;
  if (typeof onConnected !== 'function' || typeof connection.queue !== 'function' || !jute.protocol?.SetWatches || !jute.Request || !jute.OP_CODES) return false;
  const registry = new WatchRegistry();
  connection.watcherManager = registry;
  // The library binds its socket's `connect` handler per connection attempt, from this property.
  connection.onSocketConnected = function (this: Connection): void {
    registry.hidingWatches(() => onConnected.call(this));
    const { protocol, OP_CODES, XID_SET_WATCHES, Request } = jute as Jute;
    const prefixBytes = this.chrootPath ? Buffer.byteLength(this.chrootPath) : 0;
    for (const chunk of registry.chunks(SET_WATCHES_BYTES, prefixBytes)) {
      const header = new protocol.RequestHeader();
      header.type = OP_CODES.SET_WATCHES;
      header.xid = XID_SET_WATCHES;
      // queue() sets the chroot of the payload, as for the library's own SetWatches.
      const payload = new protocol.SetWatches();
      payload.relativeZxid = this.zxid;
      payload.dataWatches = chunk.data;
      payload.existWatches = chunk.exist;
      payload.childWatches = chunk.child;
      this.queue!(new Request(header, payload));
    }
  };
  return true;
}
