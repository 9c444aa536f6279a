import { tcpExchange } from '../../src/dev/child-service';
import { zooKeeperMode, type ZooKeeperEnsemble, type ZooKeeperServer } from '../../src/dev/zookeeper-server';
import { ChildrenCache, type ZkWatchEvent } from '../../src/shared/zk';
import { closeServices, eventually, startZooKeeper, startZooKeeperEnsemble, waitFor } from '../helpers/services';
import { closeZkClients, connectZk, recordZkEvents, uniqueNamespace } from '../helpers/zk';

afterEach(async () => {
  await closeZkClients();
  await closeServices();
});

describe('ZooKeeper outages', () => {
  let server: ZooKeeperServer;

  beforeEach(async () => {
    server = await startZooKeeper();
  });

  it('a short outage suspends and reconnects with the same session', async () => {
    // Long enough to cover a JVM restart on a loaded 2-core machine (8 s once was not, in CI).
    const zk = await connectZk(server.connectionString, { sessionTimeoutMs: 15_000 });
    const events = recordZkEvents(zk);
    const sessionId = zk.sessionId;
    await zk.create('/mine', 'x', 'ephemeral');

    const t0 = Date.now();
    const timeline: string[] = [];
    zk.on('state', ({ to }) => timeline.push(`${to} at ${Date.now() - t0} ms`));
    // kill -9, not SIGTERM: under CPU load the JVM's graceful shutdown sometimes left a server that,
    // restarted within 1-2 s, still let the 15 s session run out (the commit before this one fails 2
    // of 3 runs with two busy cores beside it; with kill -9, 6 of 6 passed). A crash is an outage too.
    await server.kill();
    timeline.push(`server stopped at ${Date.now() - t0} ms`);
    await waitFor(() => zk.state === 'suspended', { message: 'client suspended after the server stopped' });
    await server.restart();
    timeline.push(`server restarted at ${Date.now() - t0} ms`);
    await waitFor(() => zk.state === 'connected', { timeoutMs: 25_000, message: 'client reconnected' });

    // On failure, how long the outage took, as the client saw it.
    expect({ events, timeline }).toEqual({ events: ['suspended', 'reconnected'], timeline });
    expect(zk.sessionId).toBe(sessionId);
    expect((await zk.exists('/mine'))?.ephemeralOwner).toBe(sessionId);
  });

  it('re-arms data, child and existence watches after a reconnect (SetWatches from the watch registry)', async () => {
    const namespace = uniqueNamespace();
    // The outage as in the test above, a kill -9, with a 30 s session: a new session has no watches to
    // re-arm, and one CI run under full load found none re-armed after this outage with a 15 s session
    // (8 s and SIGTERM ran out once before that). The session is checked first, so that a failure says
    // which of the two went wrong.
    const zk = await connectZk(server.connectionString, { namespace, sessionTimeoutMs: 30_000 });
    const events = recordZkEvents(zk);
    const sessionId = zk.sessionId;
    await zk.create('/w', 'a');
    await zk.create('/dir');
    const fired: string[] = [];
    const watcher = (name: string) => ({ type, path }: ZkWatchEvent) => fired.push(`${name} ${type} ${path}`);
    await zk.get('/w', watcher('data'));
    await zk.children('/dir', watcher('child'));
    expect(await zk.exists('/later', watcher('exists'))).toBeNull();

    await server.kill();
    await waitFor(() => zk.state === 'suspended', { message: 'client suspended after the server stopped' });
    await server.restart();
    // On failure, what the client and the server were doing (one CI run and 1 of 6 loaded local runs
    // saw no reconnect within 25 s; the cause is not known yet).
    await waitFor(() => zk.state === 'connected', { timeoutMs: 25_000, message: 'client reconnected' }).catch(async (err: Error) => {
      throw new Error(`${err.message}; client ${zk.state}, events ${events.join(',')}; server ${await zooKeeperMode(server.port)}`, { cause: err });
    });
    expect({ events, sameSession: zk.sessionId === sessionId }).toEqual({ events: ['suspended', 'reconnected'], sameSession: true });

    const other = await connectZk(server.connectionString, { namespace });
    await other.set('/w', 'b');
    await other.create('/dir/x');
    await other.create('/later');
    await eventually(() => expect([...fired].sort()).toEqual(['child childrenChanged /dir', 'data dataChanged /w', 'exists created /later']), { timeoutMs: 10_000 });
  });

  it('an outage longer than the session: suspended -> lost -> renewed, and the children cache resyncs', async () => {
    const namespace = uniqueNamespace('outage');
    const zk = await connectZk(server.connectionString, { namespace, sessionTimeoutMs: 1_500 });
    const events = recordZkEvents(zk);
    const oldSession = zk.sessionId;
    await zk.ensurePath('/members');
    await zk.create('/members/old-ephemeral', '', 'ephemeral');
    await zk.create('/members/persistent', '');
    // The owner pattern: re-create ephemeral nodes when a new session arrives.
    zk.on('session:renewed', () => void zk.create('/members/renewed-ephemeral', '', 'ephemeral').catch(() => undefined));
    const cache = await new ChildrenCache(zk, { path: '/members' }).start();
    expect(cache.names()).toEqual(['old-ephemeral', 'persistent']);

    await server.stop();
    await waitFor(() => events.includes('lost'), { timeoutMs: 10_000, message: 'session declared lost while the server is down' });
    await server.restart();

    // Someone else writes while our session is being rebuilt.
    const other = await connectZk(server.connectionString, { namespace, sessionTimeoutMs: 4_000 });
    await other.create('/members/created-meanwhile', '');

    await waitFor(() => events.includes('session:renewed'), { timeoutMs: 15_000, message: 'new session' });
    expect(events.slice(0, 3)).toEqual(['suspended', 'lost', 'session:renewed']);
    expect(zk.sessionId).not.toBe(oldSession);
    // The old session's ephemeral node goes when the server expires that session.
    await eventually(() => expect(cache.names()).toEqual(['created-meanwhile', 'persistent', 'renewed-ephemeral']), {
      timeoutMs: 15_000,
    });
    await cache.close();
  });

  it('operations issued while suspended wait for the reconnect instead of failing', async () => {
    const zk = await connectZk(server.connectionString, { sessionTimeoutMs: 8_000, connectTimeoutMs: 15_000 });
    await server.stop();
    await waitFor(() => zk.state === 'suspended');
    const pending = zk.create('/written-after-restart', 'x');
    await server.restart();
    await expect(pending).resolves.toBe('/written-after-restart');
  });
});

describe('ZooKeeper outages with many watches', () => {
  it('re-arms more watches than fit in one packet the server accepts (jute.maxbuffer): SetWatches goes in chunks', async () => {
    // 200 KB instead of ZooKeeper's 1 MB: 10,000 watches of 50-byte paths (with the chroot) make one
    // SetWatches of about 540 KB, as a leader's watches of 10,000 jobs pass 1 MB. The chunks are 128 KB.
    const server = await startZooKeeper({ juteMaxBufferBytes: 200 * 1024 });
    const namespace = uniqueNamespace('watches');
    const zk = await connectZk(server.connectionString, { namespace, sessionTimeoutMs: 15_000 });
    const sessionId = zk.sessionId;
    await zk.ensurePath('/many');
    const names = Array.from({ length: 10_000 }, (_, i) => `node-with-a-longer-name-${String(i).padStart(5, '0')}`);
    const fired = new Set<string>();
    const watcher = ({ path }: ZkWatchEvent) => fired.add(path);
    // Existence watches on absent nodes: one request each, nothing to create.
    for (let i = 0; i < names.length; i += 500) await Promise.all(names.slice(i, i + 500).map((name) => zk.exists(`/many/${name}`, watcher)));

    await server.kill();
    await waitFor(() => zk.state === 'suspended', { message: 'client suspended after the server stopped' });
    await server.restart();
    await waitFor(() => zk.state === 'connected', { timeoutMs: 25_000, message: 'client reconnected' });

    const other = await connectZk(server.connectionString, { namespace });
    const created = [names[0], names[5_000], names[9_999]];
    for (const name of created) await other.create(`/many/${name}`);
    await eventually(() => expect([...fired].sort()).toEqual(created.map((name) => `/many/${name}`)), { timeoutMs: 10_000 });
    expect(zk.sessionId).toBe(sessionId);
    expect(zk.state).toBe('connected');
  });
});

describe('ZooKeeper ensemble', () => {
  let ensemble: ZooKeeperEnsemble;

  /** The member holding our client's connection: the one with the most live connections. */
  async function memberServing(): Promise<number> {
    const counts = await Promise.all(
      ensemble.members.map(async (m) => {
        const mntr = await tcpExchange(m.clientPort, 'mntr').catch(() => '');
        return Number(/zk_num_alive_connections\s+(\d+)/.exec(mntr)?.[1] ?? 0);
      }),
    );
    return ensemble.members[counts.indexOf(Math.max(...counts))].id;
  }

  it('survives the loss of the member the client is connected to, with no session loss', async () => {
    ensemble = await startZooKeeperEnsemble();
    const zk = await connectZk(ensemble.connectionString, { sessionTimeoutMs: 6_000 });
    const events = recordZkEvents(zk);
    const sessionId = zk.sessionId;
    await zk.create('/alive', '', 'ephemeral');

    const victim = await memberServing();
    await ensemble.members.find((m) => m.id === victim)!.stop();

    await zk.create('/after-loss', 'x');
    expect(zk.state).toBe('connected');
    expect(zk.sessionId).toBe(sessionId);
    expect(events).not.toContain('lost');
    expect((await zk.exists('/alive'))?.ephemeralOwner).toBe(sessionId);
    expect(await zk.getText('/after-loss')).toBe('x');
  });
});
