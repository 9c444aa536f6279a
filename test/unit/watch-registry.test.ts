import * as zookeeper from 'node-zookeeper-client';
import { installWatchRegistry, WatchRegistry } from '../../src/shared/zk/driver/watch-registry';

const { NODE_CREATED, NODE_DELETED, NODE_DATA_CHANGED, NODE_CHILDREN_CHANGED } = zookeeper.Event;

function recorder() {
  const seen: string[] = [];
  const watcher = (name: string) => (event: zookeeper.Event) => seen.push(`${name}:${event.getName()}:${event.getPath()}`);
  return { seen, watcher };
}

const notify = (registry: WatchRegistry, type: number, path: string) => registry.emit({ type, state: 3, path });

describe('WatchRegistry', () => {
  it('fires a data change to the data and existence watches of the path, once', () => {
    const r = new WatchRegistry();
    const { seen, watcher } = recorder();
    r.registerDataWatcher('/a', watcher('data'));
    r.registerExistenceWatcher('/a', watcher('exists'));
    r.registerChildWatcher('/a', watcher('child'));
    r.registerDataWatcher('/b', watcher('other'));
    notify(r, NODE_DATA_CHANGED, '/a');
    notify(r, NODE_DATA_CHANGED, '/a');
    expect(seen).toEqual(['data:NODE_DATA_CHANGED:/a', 'exists:NODE_DATA_CHANGED:/a']);
    expect(r.getChildWatcherPaths()).toEqual(['/a']);
    expect(r.getDataWatcherPaths()).toEqual(['/b']);
    expect(r.getExistenceWatcherPaths()).toEqual([]);
  });

  it('fires a creation like a data change, a deletion to data and child watches, a child change to child watches', () => {
    const r = new WatchRegistry();
    const { seen, watcher } = recorder();
    r.registerExistenceWatcher('/new', watcher('exists'));
    notify(r, NODE_CREATED, '/new');
    r.registerDataWatcher('/gone', watcher('data'));
    r.registerChildWatcher('/gone', watcher('child'));
    r.registerExistenceWatcher('/gone', watcher('exists'));
    notify(r, NODE_DELETED, '/gone');
    r.registerChildWatcher('/dir', watcher('child'));
    r.registerDataWatcher('/dir', watcher('data'));
    notify(r, NODE_CHILDREN_CHANGED, '/dir');
    expect(seen).toEqual([
      'exists:NODE_CREATED:/new',
      'data:NODE_DELETED:/gone',
      'child:NODE_DELETED:/gone',
      'child:NODE_CHILDREN_CHANGED:/dir',
    ]);
    // The existence watch of a deleted node stays, as in node-zookeeper-client (ZooKeeper re-arms it on the server).
    expect(r.getExistenceWatcherPaths()).toEqual(['/gone']);
    expect(r.getDataWatcherPaths()).toEqual(['/dir']);
  });

  it('keeps several watchers of one path in registration order and the same function once', () => {
    const r = new WatchRegistry();
    const { seen, watcher } = recorder();
    const first = watcher('first');
    r.registerDataWatcher('/a', first);
    r.registerDataWatcher('/a', first);
    r.registerDataWatcher('/a', watcher('second'));
    r.registerDataWatcher('/a', first);
    r.registerDataWatcher('/a', watcher('third'));
    notify(r, NODE_DATA_CHANGED, '/a');
    expect(seen).toEqual(['first:NODE_DATA_CHANGED:/a', 'second:NODE_DATA_CHANGED:/a', 'third:NODE_DATA_CHANGED:/a']);
    expect(r.isEmpty()).toBe(true);
  });

  it('lets a watcher re-register on the path it is notified for (a cache re-reading)', () => {
    const r = new WatchRegistry();
    let fired = 0;
    const watcher = () => {
      fired++;
      r.registerDataWatcher('/a', watcher);
    };
    r.registerDataWatcher('/a', watcher);
    notify(r, NODE_DATA_CHANGED, '/a');
    notify(r, NODE_DATA_CHANGED, '/a');
    expect(fired).toBe(2);
    expect(r.getDataWatcherPaths()).toEqual(['/a']);
  });

  it('rejects a watcher that is not a function and an unknown event type', () => {
    const r = new WatchRegistry();
    expect(() => r.registerDataWatcher('/a', 'nope' as never)).toThrow('watcher must be a valid function');
    expect(() => notify(r, 99, '/a')).toThrow('Unknown event type: 99');
  });

  it('replaces the watcher manager of a node-zookeeper-client client, and only one that looks like it', () => {
    // Never connected (connect() is what opens a socket), so nothing to close.
    const client = zookeeper.createClient('127.0.0.1:1');
    expect(installWatchRegistry(client)).toBe(true);
    expect((client as unknown as { connectionManager: { watcherManager: unknown } }).connectionManager.watcherManager).toBeInstanceOf(WatchRegistry);
    expect(installWatchRegistry({} as zookeeper.Client)).toBe(false);
    const odd = { connectionManager: { watcherManager: { emit: () => undefined } } };
    expect(installWatchRegistry(odd as unknown as zookeeper.Client)).toBe(false);
  });

  it('splits the watched paths into SetWatches chunks of at most maxBytes (length prefix and chroot counted), data, existence, then child', () => {
    const r = new WatchRegistry();
    const noop = () => undefined;
    for (let i = 0; i < 10; i += 1) r.registerDataWatcher(`/d${i}`, noop); // 3 bytes + 4 each
    r.registerExistenceWatcher('/e', noop);
    r.registerChildWatcher('/c', noop);
    expect(r.chunks(1_000)).toEqual([{ data: r.getDataWatcherPaths(), exist: ['/e'], child: ['/c'] }]);
    // 7 bytes per data path, 6 per other; with a 3-byte chroot, 10 and 9: three paths per 30 bytes.
    const chunks = r.chunks(30, 3);
    expect(chunks.map((c) => [...c.data, ...c.exist, ...c.child])).toEqual([['/d0', '/d1', '/d2'], ['/d3', '/d4', '/d5'], ['/d6', '/d7', '/d8'], ['/d9', '/e', '/c']]);
    expect(chunks[3]).toEqual({ data: ['/d9'], exist: ['/e'], child: ['/c'] });
    // A path longer than a chunk goes alone; no watches, no chunks.
    expect(r.chunks(5).length).toBe(12);
    expect(new WatchRegistry().chunks()).toEqual([]);
  });

  it('hides its watches from the library while its connect handler runs, so that the patch sends them in chunks', () => {
    const r = new WatchRegistry();
    r.registerDataWatcher('/a', () => undefined);
    let seenEmpty: boolean | undefined;
    r.hidingWatches(() => (seenEmpty = r.isEmpty()));
    expect(seenEmpty).toBe(true);
    expect(r.isEmpty()).toBe(false);
  });
});
