/**
 * MultiBatcher against a real ZooKeeper: groups issued in one turn share one transaction (nodes
 * created by one multi share their creation zxid), a conflicting group fails alone without taking
 * the others down, reads sent behind a group see its writes, and a group bound to a session the
 * client has left is refused.
 */
import { ErrorCodes } from '../../src/shared/errors';
import type { ZkClient, ZkOp } from '../../src/shared/zk';
import { MultiBatcher } from '../../src/worker/multi-batcher';
import { connectZk, useZooKeeperServer } from '../helpers/zk';

const server = useZooKeeperServer();
let zk: ZkClient;

beforeEach(async () => {
  zk = await connectZk(server.connectionString);
  await zk.ensurePath('/items');
});

const create = (path: string, data = ''): ZkOp => ({ type: 'create', path, data, mode: 'ephemeral' });

describe('MultiBatcher (real ZooKeeper)', () => {
  it('commits the groups issued in one turn in one transaction', async () => {
    const batcher = new MultiBatcher();
    const session = zk.onSession(zk.sessionId);
    await Promise.all(Array.from({ length: 20 }, (_, i) => batcher.commit(session, [create(`/items/${i}`)])));
    const stats = await Promise.all(Array.from({ length: 20 }, (_, i) => zk.exists(`/items/${i}`)));
    expect(stats.every((s) => s?.ephemeralOwner === zk.sessionId)).toBe(true);
    expect(new Set(stats.map((s) => s!.czxid)).size).toBe(1);
  });

  it('groups issued in different turns go in different transactions', async () => {
    const batcher = new MultiBatcher();
    const session = zk.onSession(zk.sessionId);
    await batcher.commit(session, [create('/items/a')]);
    await batcher.commit(session, [create('/items/b')]);
    const [a, b] = await Promise.all([zk.exists('/items/a'), zk.exists('/items/b')]);
    expect(a!.czxid).not.toBe(b!.czxid);
  });

  it('fails only the group whose operation failed; the others commit', async () => {
    await zk.create('/items/taken', 'someone');
    const batcher = new MultiBatcher();
    const session = zk.onSession(zk.sessionId);
    const results = await Promise.allSettled([
      batcher.commit(session, [create('/items/1')]),
      batcher.commit(session, [create('/items/taken')]),
      batcher.commit(session, [create('/items/2'), { type: 'set', path: '/items', data: 'x', version: -1 }]),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason).toMatchObject({ code: ErrorCodes.ZK_NODE_EXISTS });
    expect(await zk.getText('/items/taken')).toBe('someone');
    expect(await zk.exists('/items/1')).not.toBeNull();
    expect(await zk.exists('/items/2')).not.toBeNull();
    expect(await zk.getText('/items')).toBe('x');
  });

  it('keeps each group atomic: a group failing on its second operation leaves its first undone', async () => {
    await zk.create('/items/taken');
    const batcher = new MultiBatcher();
    const session = zk.onSession(zk.sessionId);
    const results = await Promise.allSettled([
      batcher.commit(session, [create('/items/mine'), create('/items/taken')]),
      batcher.commit(session, [create('/items/other')]),
    ]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'fulfilled']);
    expect(await zk.exists('/items/mine')).toBeNull();
    expect(await zk.exists('/items/other')).not.toBeNull();
  });

  it('answers the read sent behind a group after the group, so it sees the write', async () => {
    await zk.create('/items/counter', '1');
    const batcher = new MultiBatcher();
    const session = zk.onSession(zk.sessionId);
    const [first, second] = await Promise.all([
      batcher.commit(session, [{ type: 'set', path: '/items/counter', data: '2', version: -1 }], (s) => s.get('/items/counter')),
      batcher.commit(session, [create('/items/x')], (s) => s.get('/items/missing')),
    ]);
    expect((await first.read!).data.toString()).toBe('2');
    await expect(second.read!).rejects.toMatchObject({ code: ErrorCodes.ZK_NO_NODE });
  });

  it("gives each group its own ops' results: a create's path, a set's new stat", async () => {
    await zk.create('/items/counter', '1');
    const batcher = new MultiBatcher();
    const session = zk.onSession(zk.sessionId);
    const [created, set] = await Promise.all([
      batcher.commit(session, [create('/items/p'), create('/items/q')]),
      batcher.commit(session, [{ type: 'set', path: '/items/counter', data: '2', version: 0 }]),
    ]);
    expect(created.results.map((r) => r.path)).toEqual(['/items/p', '/items/q']);
    expect(set.results).toHaveLength(1);
    expect(set.results[0].stat?.version).toBe(1);
    expect(set.results[0].stat?.version).toBe((await zk.get('/items/counter')).stat.version);
  });

  it('refuses a group bound to a session the client has left', async () => {
    const batcher = new MultiBatcher();
    const stale = zk.onSession('0x1234');
    await expect(batcher.commit(stale, [create('/items/late')])).rejects.toMatchObject({ code: ErrorCodes.ZK_SESSION_EXPIRED });
    expect(await zk.exists('/items/late')).toBeNull();
  });

  it('splits a large burst into transactions of bounded size, all committed', async () => {
    const batcher = new MultiBatcher();
    const session = zk.onSession(zk.sessionId);
    await Promise.all(Array.from({ length: 150 }, (_, i) => batcher.commit(session, [create(`/items/n${i}`)])));
    const stats = await Promise.all(Array.from({ length: 150 }, (_, i) => zk.exists(`/items/n${i}`)));
    expect(stats.every((s) => s !== null)).toBe(true);
    expect(new Set(stats.map((s) => s!.czxid)).size).toBe(3);
  });
});
