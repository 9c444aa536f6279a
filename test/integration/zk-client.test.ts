import net from 'node:net';
import { ErrorCodes } from '../../src/shared/errors';
import { ChildrenCache, NodeCache, ZkClient, type ChildEntry } from '../../src/shared/zk';
import { eventually } from '../helpers/services';
import { connectZk, uniqueNamespace, useZooKeeperServer } from '../helpers/zk';

const server = useZooKeeperServer();

describe('ZkClient operations', () => {
  it('creates, reads, updates and deletes nodes relative to its namespace', async () => {
    const zk = await connectZk(server.connectionString);
    await zk.ensurePath('/jobs/billing/servers');
    expect(await zk.create('/jobs/billing/config', '{"a":1}')).toBe('/jobs/billing/config');
    expect((await zk.get('/jobs/billing/config')).data.toString()).toBe('{"a":1}');
    const stat = await zk.set('/jobs/billing/config', '{"a":2}', 0);
    expect(stat.version).toBe(1);
    expect(await zk.getText('/jobs/billing/config')).toBe('{"a":2}');
    expect(await zk.getText('/jobs/billing/missing')).toBeUndefined();
    expect((await zk.children('/jobs/billing')).sort()).toEqual(['config', 'servers']);
    const seq = await zk.create('/jobs/billing/servers/n_', 'x', 'persistent_sequential');
    expect(seq).toMatch(/^\/jobs\/billing\/servers\/n_\d{10}$/);
    await zk.deleteRecursive('/jobs');
    expect(await zk.exists('/jobs')).toBeNull();
  });

  it("counts every create and every delete of a node's children in its cversion, and nothing else (the worker's misfire check relies on it)", async () => {
    const zk = await connectZk(server.connectionString);
    await zk.ensurePath('/item');
    const steps: Array<[string, number]> = [];
    const step = async (name: string, op: () => Promise<unknown>) => {
      await op();
      steps.push([name, (await zk.exists('/item'))!.cversion]);
    };
    await step('start', async () => undefined);
    await step('create ephemeral', () => zk.create('/item/running', 'a', 'ephemeral'));
    await step('delete it', () => zk.delete('/item/running'));
    await step('create', () => zk.create('/item/misfire', '1'));
    await step('set the child', () => zk.set('/item/misfire', '2'));
    await step('set the node', () => zk.set('/item', '[]'));
    await step('delete it', () => zk.delete('/item/misfire'));
    // The same two in one multi, as a release does: the set's stat is taken between them.
    await zk.create('/item/running', 'a', 'ephemeral');
    const [set] = await zk.multi().set('/item', '[1]').delete('/item/running').commit();
    steps.push(['set in a multi, before the delete', set.stat!.cversion]);
    steps.push(['after that multi', (await zk.exists('/item'))!.cversion]);
    expect(steps).toEqual([
      ['start', 0],
      ['create ephemeral', 1],
      ['delete it', 2],
      ['create', 3],
      ['set the child', 3],
      ['set the node', 3],
      ['delete it', 4],
      ['set in a multi, before the delete', 5],
      ['after that multi', 6],
    ]);
  });

  it('keeps namespaces apart', async () => {
    const a = await connectZk(server.connectionString, { namespace: uniqueNamespace('a') });
    const b = await connectZk(server.connectionString, { namespace: uniqueNamespace('b') });
    await a.create('/only-in-a', 'x');
    expect(await b.exists('/only-in-a')).toBeNull();
    expect(await a.children('/')).toEqual(['only-in-a']);
  });

  it('works under a chroot in the connection string, with every path it hands back relative to its namespace (the connection is chrooted to the namespace root)', async () => {
    const namespace = uniqueNamespace('ns');
    const root = await connectZk(server.connectionString, { namespace: 'apps' });
    const zk = await connectZk(`${server.connectionString}/apps`, { namespace });
    // A relative path that begins with the namespace's own name stays what it is.
    await zk.ensurePath(`/${namespace}/dir`);
    expect(await zk.create(`/${namespace}/dir/n_`, 'x', 'persistent_sequential')).toMatch(new RegExp(`^/${namespace}/dir/n_\\d{10}$`));
    const [created] = await zk.multi().create(`/${namespace}/made-in-a-multi`, 'y').commit();
    expect(created.path).toBe(`/${namespace}/made-in-a-multi`);
    const events: string[] = [];
    await zk.children(`/${namespace}/dir`, ({ type, path }) => events.push(`${type} ${path}`));
    await zk.create(`/${namespace}/dir/second`);
    await eventually(() => expect(events).toEqual([`childrenChanged /${namespace}/dir`]));
    // On the server: under the connection string's chroot, then the namespace.
    expect((await root.children(`/${namespace}/${namespace}`)).sort()).toEqual(['dir', 'made-in-a-multi']);
    expect(await zk.children('/')).toEqual([namespace]);
    // A multi on the namespace root itself.
    const [checked] = await zk.multi().check('/', (await zk.exists('/'))!.version).commit();
    expect(checked.type).toBe('check');
  });

  it('sends a multi made before its first session to the right paths (whether paths carry the root is known only then)', async () => {
    const namespace = uniqueNamespace('early');
    const zk = new ZkClient({ connectionString: server.connectionString, namespace, sessionTimeoutMs: 4_000, connectTimeoutMs: 5_000, retry: { baseSleepMs: 50, maxSleepMs: 500, maxRetries: 3 } });
    try {
      const early = zk.multi().create('/made-early', 'x').commit();
      await zk.start();
      expect((await early)[0].path).toBe('/made-early');
      expect(await zk.getText('/made-early')).toBe('x');
    } finally {
      await zk.close();
    }
  });

  it('maps ZooKeeper failures to named error codes', async () => {
    const zk = await connectZk(server.connectionString);
    await zk.create('/n', 'x');
    await expect(zk.create('/n', 'x')).rejects.toMatchObject({ code: ErrorCodes.ZK_NODE_EXISTS, path: '/n' });
    await expect(zk.get('/absent')).rejects.toMatchObject({ code: ErrorCodes.ZK_NO_NODE });
    await expect(zk.set('/n', 'y', 7)).rejects.toMatchObject({ code: ErrorCodes.ZK_BAD_VERSION });
    await zk.create('/n/child');
    await expect(zk.delete('/n')).rejects.toMatchObject({ code: ErrorCodes.ZK_NOT_EMPTY });
    await zk.create('/e', '', 'ephemeral');
    await expect(zk.create('/e/child')).rejects.toMatchObject({ code: ErrorCodes.ZK_NO_CHILDREN_FOR_EPHEMERALS });
    await expect(zk.get('relative')).rejects.toMatchObject({ code: ErrorCodes.ZK_BAD_ARGUMENTS });
    // A multi with a path ZooKeeper would refuse is refused before anything is sent, naming it.
    await expect(zk.multi().create('/ok').delete('/n//child').commit()).rejects.toMatchObject({ code: ErrorCodes.ZK_BAD_ARGUMENTS, message: expect.stringContaining('/n//child') });
    expect(await zk.exists('/ok')).toBeNull();
  });

  it('reports the owner session of ephemeral nodes', async () => {
    const zk = await connectZk(server.connectionString);
    await zk.create('/eph', '', 'ephemeral');
    await zk.create('/per', '');
    expect((await zk.exists('/eph'))!.ephemeralOwner).toBe(zk.sessionId);
    expect((await zk.exists('/per'))!.ephemeralOwner).toBe('0');
  });

  it("hands out one object of requests bound to a session per session; one bound to a session the client is not on fails", async () => {
    const zk = await connectZk(server.connectionString);
    const session = zk.onSession(zk.sessionId);
    // Shared: a worker's item leases each keep the one they were taken on.
    expect(zk.onSession(zk.sessionId)).toBe(session);
    await zk.create('/bound', 'x', 'ephemeral');
    expect((await session.exists('/bound'))!.ephemeralOwner).toBe(zk.sessionId);
    const other = zk.onSession('1234');
    expect(other).not.toBe(session);
    expect(other.sessionId).toBe('1234');
    await expect(other.exists('/bound')).rejects.toMatchObject({ code: ErrorCodes.ZK_SESSION_EXPIRED });
    // Asked for again after another session's, it still answers for its own.
    expect((await zk.onSession(zk.sessionId).get('/bound')).data.toString()).toBe('x');
  });

  it('refuses to connect to a server that is not there, naming it', async () => {
    const started = Date.now();
    await expect(
      connectZk('127.0.0.1:1', { connectTimeoutMs: 300, retry: { baseSleepMs: 10, maxSleepMs: 50, maxRetries: 2 } }),
    ).rejects.toMatchObject({ code: ErrorCodes.ZK_CONNECT_FAILED, message: expect.stringContaining('127.0.0.1:1') });
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});

describe('multi transactions', () => {
  it('applies all operations or none', async () => {
    const zk = await connectZk(server.connectionString);
    await zk.create('/taken', 'x');
    const failing = zk.multi().create('/fresh', 'a').create('/taken', 'b');
    await expect(failing.commit()).rejects.toMatchObject({ code: ErrorCodes.ZK_NODE_EXISTS, details: expect.objectContaining({ opIndex: 1 }) });
    expect(await zk.exists('/fresh')).toBeNull();
    const results = await zk.multi().create('/fresh', 'a').set('/taken', 'c').delete('/fresh').commit();
    expect(results.map((r) => r.type)).toEqual(['create', 'set', 'delete']);
    expect(await zk.getText('/taken')).toBe('c');
  });

  it('fails a fenced multi once the checked node changed, even from version 0', async () => {
    const zk = await connectZk(server.connectionString);
    await zk.create('/fence', 'me', 'ephemeral');
    await zk.create('/target', 'v0');
    const fence = { path: '/fence', version: 0 };
    await zk.fencedMulti(fence).set('/target', 'v1').commit();
    expect(await zk.getText('/target')).toBe('v1');

    await zk.set('/fence', 'someone else');
    await expect(zk.fencedMulti(fence).set('/target', 'v2').commit()).rejects.toMatchObject({ code: ErrorCodes.ZK_FENCE_LOST });
    expect(await zk.getText('/target')).toBe('v1');

    await zk.delete('/fence');
    await expect(zk.fencedMulti({ path: '/fence', version: 1 }).set('/target', 'v3').commit()).rejects.toMatchObject({
      code: ErrorCodes.ZK_FENCE_LOST,
    });
    expect(await zk.getText('/target')).toBe('v1');
  });
});

describe('digest ACLs', () => {
  it('refuses writes (and reads) from a client without the digest', async () => {
    const namespace = uniqueNamespace('secure');
    const digest = { user: 'shardcron', password: 's3cret' };
    const owner = await connectZk(server.connectionString, { namespace, digest });
    await owner.create('/config', 'secret');
    await owner.ensurePath('/jobs/a');

    const anonymous = await connectZk(server.connectionString, { namespace });
    await expect(anonymous.create('/intruder', 'x')).rejects.toMatchObject({ code: ErrorCodes.ZK_NO_AUTH });
    await expect(anonymous.set('/config', 'changed')).rejects.toMatchObject({ code: ErrorCodes.ZK_NO_AUTH });
    await expect(anonymous.create('/jobs/a/b')).rejects.toMatchObject({ code: ErrorCodes.ZK_NO_AUTH });
    await expect(anonymous.get('/config')).rejects.toMatchObject({ code: ErrorCodes.ZK_NO_AUTH });

    const wrong = await connectZk(server.connectionString, { namespace, digest: { user: 'shardcron', password: 'guess' } });
    await expect(wrong.set('/config', 'changed')).rejects.toMatchObject({ code: ErrorCodes.ZK_NO_AUTH });

    const colleague = await connectZk(server.connectionString, { namespace, digest });
    await colleague.set('/config', 'shared');
    expect(await owner.getText('/config')).toBe('shared');
  });
});

describe('caches', () => {
  it('children cache emits added, changed and removed, decoding data and flagging corrupt entries', async () => {
    const zk = await connectZk(server.connectionString);
    await zk.ensurePath('/members');
    await zk.create('/members/a', '{"n":1}');
    const cache = await new ChildrenCache(zk, {
      path: '/members',
      decode: (b) => JSON.parse(b.toString()) as { n: number },
    }).start();
    const events: string[] = [];
    const record = (kind: string) => (e: ChildEntry<{ n: number }>) => events.push(`${kind}:${e.name}:${e.data?.n ?? '-'}`);
    cache.on('added', record('added'));
    cache.on('changed', record('changed'));
    cache.on('removed', record('removed'));
    const invalid: string[] = [];
    cache.on('invalid', (e) => invalid.push(e.name));
    expect(cache.names()).toEqual(['a']);
    expect(cache.get('a')?.data).toEqual({ n: 1 });

    await zk.create('/members/b', '{"n":2}');
    await zk.set('/members/a', '{"n":3}');
    await zk.create('/members/bad', '{not json');
    await zk.delete('/members/b');
    await eventually(() => expect(cache.names()).toEqual(['a', 'bad']));
    await eventually(() => expect(cache.get('a')?.data).toEqual({ n: 3 }));
    expect(events).toEqual(expect.arrayContaining(['added:b:2', 'changed:a:3', 'removed:b:2']));
    expect(invalid).toEqual(['bad']);
    expect(cache.get('bad')?.data).toBeUndefined();
    await cache.close();
  });

  it('children cache waits for a parent that does not exist yet', async () => {
    const zk = await connectZk(server.connectionString);
    const cache = await new ChildrenCache(zk, { path: '/later/kids' }).start();
    expect(cache.names()).toEqual([]);
    await zk.ensurePath('/later/kids/x');
    await eventually(() => expect(cache.names()).toEqual(['x']));
    await zk.deleteRecursive('/later');
    await eventually(() => expect(cache.names()).toEqual([]));
    await zk.ensurePath('/later/kids/y');
    await eventually(() => expect(cache.names()).toEqual(['y']));
    await cache.close();
  });

  it('node cache follows creation, changes and deletion', async () => {
    const zk = await connectZk(server.connectionString);
    const cache = await new NodeCache(zk, { path: '/flag', decode: (b) => b.toString() }).start();
    const seen: string[] = [];
    cache.on('changed', (e) => seen.push(`changed:${e.value}`));
    cache.on('deleted', () => seen.push('deleted'));
    expect(cache.exists).toBe(false);
    await zk.create('/flag', 'one');
    await eventually(() => expect(cache.value).toBe('one'));
    await zk.set('/flag', 'two');
    await eventually(() => expect(cache.value).toBe('two'));
    await zk.delete('/flag');
    await eventually(() => expect(cache.exists).toBe(false));
    expect(seen).toEqual(['changed:one', 'changed:two', 'deleted']);
    await cache.close();
  });

  it('a listener that throws does not break the cache', async () => {
    const zk = await connectZk(server.connectionString);
    const cache = await new ChildrenCache(zk, { path: '/t' }).start();
    cache.on('added', () => {
      throw new Error('user bug');
    });
    await zk.ensurePath('/t/1');
    await zk.ensurePath('/t/2');
    await eventually(() => expect(cache.names()).toEqual(['1', '2']));
    await cache.close();
  });
});

describe('close', () => {
  it('is idempotent and refuses later operations with CLOSED', async () => {
    const zk: ZkClient = await connectZk(server.connectionString);
    await Promise.all([zk.close(), zk.close()]);
    expect(zk.state).toBe('closed');
    await expect(zk.get('/')).rejects.toMatchObject({ code: ErrorCodes.CLOSED });
  });
});

describe('ZkClient connect handshake', () => {
  it('drops a connection whose handshake the server never answers and connects again (ZooKeeper 3.8.0 does that while it loads its database)', async () => {
    const [host, port] = server.connectionString.split(':');
    // Holds the first connection open and silent, as a server that accepted it and never reads it;
    // every later one goes to the real server.
    const held: net.Socket[] = [];
    const sockets: net.Socket[] = [];
    let accepted = 0;
    const front = net.createServer((socket) => {
      accepted += 1;
      sockets.push(socket);
      if (accepted === 1) {
        held.push(socket);
        return;
      }
      const back = net.connect(Number(port), host);
      socket.pipe(back).pipe(socket);
      const end = () => { socket.destroy(); back.destroy(); };
      socket.on('error', end).on('close', end);
      back.on('error', end).on('close', end);
    });
    await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
    try {
      const started = Date.now();
      // A 6 s session: the library's connect timeout is 6 s, the handshake's 2 s.
      const zk = await connectZk(`127.0.0.1:${(front.address() as net.AddressInfo).port}`, { sessionTimeoutMs: 6_000, connectTimeoutMs: 15_000 });
      expect(accepted).toBe(2);
      expect(Date.now() - started).toBeGreaterThanOrEqual(1_900);
      expect(Date.now() - started).toBeLessThan(10_000);
      await zk.create('/answered', 'yes');
      expect(await zk.getText('/answered')).toBe('yes');
      await zk.close();
    } finally {
      // close() waits for every connection to end.
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => front.close(resolve));
    }
  }, 30_000);
});
