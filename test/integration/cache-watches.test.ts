/**
 * The caches of one client share one watcher, which hands each notification to the caches of its
 * path (and, for a child's data, to the children caches of its parent): these pin that every cache
 * still sees what it watches when several watch the same or related paths.
 */
import { ChildrenCache, NodeCache } from '../../src/shared/zk';
import { eventually } from '../helpers/services';
import { connectZk, useZooKeeperServer } from '../helpers/zk';

const server = useZooKeeperServer();

const text = (b: Buffer): string => b.toString();

describe('cache watches', () => {
  it('two caches of one path both follow it, and one that closes leaves the other watching', async () => {
    const zk = await connectZk(server.connectionString);
    const first = await new NodeCache(zk, { path: '/shared', decode: text }).start();
    const second = await new NodeCache(zk, { path: '/shared', decode: text }).start();
    await zk.create('/shared', 'one');
    await eventually(() => expect([first.value, second.value]).toEqual(['one', 'one']));
    await first.close();
    await zk.set('/shared', 'two');
    await eventually(() => expect(second.value).toBe('two'));
    expect(first.value).toBe('one');
    await second.close();
  });

  it('a node cache of a child and the children cache of its parent both see the child change', async () => {
    const zk = await connectZk(server.connectionString);
    await zk.ensurePath('/parent');
    await zk.create('/parent/a', 'one');
    const children = await new ChildrenCache(zk, { path: '/parent', decode: text }).start();
    const child = await new NodeCache(zk, { path: '/parent/a', decode: text }).start();
    const names = await new ChildrenCache(zk, { path: '/parent' }).start();
    const changed: string[] = [];
    children.on('changed', (entry) => changed.push(`${entry.name}:${entry.data}`));
    await zk.set('/parent/a', 'two');
    await eventually(() => expect([children.get('a')?.data, child.value]).toEqual(['two', 'two']));
    expect(changed).toEqual(['a:two']);
    await zk.create('/parent/b', 'three');
    await eventually(() => expect([children.names(), names.names()]).toEqual([['a', 'b'], ['a', 'b']]));
    await zk.delete('/parent/a');
    await eventually(() => expect([children.names(), names.names(), child.exists]).toEqual([['b'], ['b'], false]));
    await Promise.all([children.close(), child.close(), names.close()]);
  });

  it('caches of different clients do not share a watcher', async () => {
    const one = await connectZk(server.connectionString);
    const other = await connectZk(server.connectionString, { namespace: one.options.namespace });
    const a = await new NodeCache(one, { path: '/flag', decode: text }).start();
    const b = await new NodeCache(other, { path: '/flag', decode: text }).start();
    await a.close();
    await one.create('/flag', 'up');
    await eventually(() => expect(b.value).toBe('up'));
    expect(a.exists).toBe(false);
    await b.close();
  });

  it('caches of usually absent nodes (expectAbsent) follow a create, a delete and a create again', async () => {
    const zk = await connectZk(server.connectionString);
    const flag = await new NodeCache(zk, { path: '/usually/flag', decode: text, expectAbsent: true }).start();
    const triggers = await new ChildrenCache(zk, { path: '/usually/trigger', expectAbsent: true }).start();
    const events: string[] = [];
    flag.on('changed', ({ value }) => events.push(`changed:${value}`));
    flag.on('deleted', () => events.push('deleted'));
    expect([flag.exists, triggers.names()]).toEqual([false, []]);
    await zk.ensurePath('/usually');
    await zk.create('/usually/flag', 'up');
    await zk.ensurePath('/usually/trigger');
    await zk.create('/usually/trigger/r1', '');
    await eventually(() => expect([flag.value, triggers.names()]).toEqual(['up', ['r1']]));
    await zk.set('/usually/flag', 'again');
    await eventually(() => expect(flag.value).toBe('again'));
    await zk.delete('/usually/flag');
    await zk.delete('/usually/trigger/r1');
    await eventually(() => expect([flag.exists, triggers.names()]).toEqual([false, []]));
    // The trigger parent is still there, empty: the cache lists it again when a child comes.
    await zk.create('/usually/trigger/r2', '');
    await zk.create('/usually/flag', 'back');
    await eventually(() => expect([flag.value, triggers.names()]).toEqual(['back', ['r2']]));
    expect(events).toEqual(['changed:up', 'changed:again', 'deleted', 'changed:back']);
    await Promise.all([flag.close(), triggers.close()]);
  });
});
