/**
 * A worker's registration (DESIGN.md flow 1, with one instance entry per worker) against a real
 * ZooKeeper: configs of new jobs in one multi each, then the job list and one ephemeral entry; a
 * worker joining a namespace writes nothing per job before it is registered, and its server nodes
 * follow; an entry of another live process with the same id is refused by name.
 */
import { defineJob } from '../../src';
import { ErrorCodes } from '../../src/shared/errors';
import { silentLogger } from '../../src/shared/logger';
import { instanceEntryCodec } from '../../src/shared/registry/instance-info';
import { readJobList } from '../../src/shared/registry/job-lists';
import { registryPaths } from '../../src/shared/registry/registry-paths';
import type { ZkClient } from '../../src/shared/zk';
import { InstanceRegistration } from '../../src/worker/instance-registration';
import { closeZkClients, connectZk, uniqueNamespace, useZooKeeperServer } from '../helpers/zk';

const server = useZooKeeperServer();

afterEach(async () => {
  await closeZkClients();
});

const jobs = (count: number) => Array.from({ length: count }, (_, i) => defineJob({ name: `reg${i}`, cron: '0 0 0 1 1 ? 2099', execute: async () => undefined }));

const registration = (zk: ZkClient, namespace: string, instanceId: string, count: number) =>
  new InstanceRegistration(zk, { namespace, instanceId, ip: '10.0.0.7', jobs: jobs(count), log: silentLogger });

async function entryOf(zk: ZkClient, instanceId: string) {
  const { data, stat } = await zk.get(registryPaths.instance(instanceId));
  const entry = instanceEntryCodec.decode(data, registryPaths.instance(instanceId));
  return { entry, stat, jobs: (await readJobList(zk, entry.jobs)).sort() };
}

/** The zxid of a new probe node: every transaction, a failed create too, takes one. */
async function zxid(zk: ZkClient, name: string): Promise<bigint> {
  await zk.create(`/${name}`, '');
  return BigInt(`0x${(await zk.exists(`/${name}`))!.czxid}`);
}

describe('instance registration', () => {
  it('leaves no entry when it unregisters while a registration is under way, and registers no more after', async () => {
    // Found in review: a session renewed as the worker closes registers again beside the close;
    // the entry written after the close's delete named a queue nobody consumed.
    const namespace = uniqueNamespace('reg');
    const zk = await connectZk(server.connectionString, { namespace });
    const reg = registration(zk, namespace, 'w1', 200);
    const registering = reg.register();
    const unregistering = reg.unregister();
    // The registration stops before its next write: it is refused, as one started after would be.
    await expect(registering).rejects.toMatchObject({ code: ErrorCodes.CLOSED });
    await unregistering;
    expect(await zk.exists(registryPaths.instance('w1'))).toBeNull();
    await expect(reg.register()).rejects.toMatchObject({ code: ErrorCodes.CLOSED });
    expect(await zk.exists(registryPaths.instance('w1'))).toBeNull();
  });

  it('registers 250 jobs in one entry, and a second worker joining writes its list and its entry, nothing per job', async () => {
    const namespace = uniqueNamespace('reg');
    const zk = await connectZk(server.connectionString, { namespace });
    const first = registration(zk, namespace, 'w1', 250);
    const { queue } = await first.register();
    const { entry, stat, jobs: listed } = await entryOf(zk, 'w1');
    expect(stat.ephemeralOwner).toBe(zk.sessionId);
    expect(entry).toMatchObject({ queue, state: 'ready', ip: '10.0.0.7', jobs: { parts: 1, count: 250 } });
    expect(listed).toEqual(jobs(250).map((j) => j.name).sort());
    // A job new to the namespace got its nodes in one transaction: they share the zxid of their creation.
    const created = await Promise.all([registryPaths.job('reg42'), registryPaths.jobConfig('reg42'), registryPaths.jobServers('reg42'), registryPaths.jobServer('reg42', '10.0.0.7')].map((p) => zk.exists(p)));
    expect(new Set(created.map((s) => s!.czxid)).size).toBe(1);
    // No per-job instance node of the earlier layout.
    expect(await zk.exists(registryPaths.jobInstances('reg42'))).toBeNull();

    const before = await zxid(zk, 'probe-before');
    const other = await connectZk(server.connectionString, { namespace });
    const second = registration(other, namespace, 'w2', 250);
    await second.register();
    await second.settled();
    const after = await zxid(zk, 'probe-after');
    expect((await entryOf(zk, 'w2')).jobs).toHaveLength(250);
    // Its session and the create of the namespace root that finds it there, its list part, its entry
    // and the probe: no create of a config or a server that is there (with 250 instance nodes and
    // their multis the per-job layout took 10).
    expect(Number(after - before)).toBeLessThanOrEqual(5);
  });

  it('two workers registering the same new jobs at once both register; each job node is made once', async () => {
    const namespace = uniqueNamespace('reg');
    const [a, b] = await Promise.all([connectZk(server.connectionString, { namespace }), connectZk(server.connectionString, { namespace })]);
    const [ra, rb] = [registration(a, namespace, 'w1', 150), registration(b, namespace, 'w2', 150)];
    await Promise.all([ra.register(), rb.register()]);
    await Promise.all([ra.settled(), rb.settled()]);
    expect((await a.children(registryPaths.instances())).sort()).toEqual(['w1', 'w2']);
    expect((await entryOf(a, 'w1')).jobs).toEqual((await entryOf(a, 'w2')).jobs);
    for (const i of [0, 75, 149]) {
      expect(await a.children(registryPaths.jobServers(`reg${i}`))).toEqual(['10.0.0.7']);
      expect(JSON.parse((await a.getText(registryPaths.jobConfig(`reg${i}`)))!)).toMatchObject({ name: `reg${i}` });
    }
  });

  it('refuses, by name, an instance id whose entry another live process holds', async () => {
    const namespace = uniqueNamespace('reg');
    const first = await connectZk(server.connectionString, { namespace });
    await registration(first, namespace, 'w1', 1).register();
    const second = await connectZk(server.connectionString, { namespace, sessionTimeoutMs: 1_500 });
    const error = await registration(second, namespace, 'w1', 3).register().then(() => undefined, (err: unknown) => err);
    expect(error).toMatchObject({ code: ErrorCodes.INVALID_CONFIG, details: { instanceId: 'w1', field: 'SHARDCRON_INSTANCE_ID' } });
    expect((await second.exists(registryPaths.instance('w1')))?.ephemeralOwner).toBe(first.sessionId);
  });

  it('takes over the entry of the same instance id whose process goes away while it waits', async () => {
    const namespace = uniqueNamespace('reg');
    const first = await connectZk(server.connectionString, { namespace });
    await registration(first, namespace, 'w1', 1).register();
    const second = await connectZk(server.connectionString, { namespace });
    const registering = registration(second, namespace, 'w1', 120).register();
    setTimeout(() => void first.close(), 300);
    await registering;
    const { stat, jobs: listed } = await entryOf(second, 'w1');
    expect(stat.ephemeralOwner).toBe(second.sessionId);
    expect(listed).toHaveLength(120);
  });

  it('reads nothing per job to register; a listed job whose config went is written back after', async () => {
    const namespace = uniqueNamespace('reg');
    const zk = await connectZk(server.connectionString, { namespace });
    await registration(zk, namespace, 'w1', 3).register();
    // reg2's config was removed, its job node left: the listing cannot tell, the worker's watch can.
    await zk.delete(registryPaths.jobConfig('reg2'));
    const other = await connectZk(server.connectionString, { namespace });
    const reads = [jest.spyOn(other, 'exists'), jest.spyOn(other, 'get')];
    const known = new Set(['reg0', 'reg1']);
    const second = new InstanceRegistration(other, { namespace, instanceId: 'w2', ip: '10.0.0.7', jobs: jobs(3), log: silentLogger, configStored: async (job) => known.has(job) });
    await second.register();
    // Its server nodes are checked beside its first runs, not before it is registered.
    expect(reads.flatMap((spy) => spy.mock.calls.map(([path]) => path as string)).filter((path) => !path.startsWith('/.cluster') && !path.includes('/servers/'))).toEqual([]);
    await second.settled();
    expect(JSON.parse((await zk.getText(registryPaths.jobConfig('reg2')))!)).toMatchObject({ name: 'reg2' });
  });

  it('follows added and removed jobs with a new list, and a state change with one write to the entry', async () => {
    const namespace = uniqueNamespace('reg');
    const zk = await connectZk(server.connectionString, { namespace });
    const worker = registration(zk, namespace, 'w1', 2);
    await worker.register();
    const { entry: before } = await entryOf(zk, 'w1');
    const added = defineJob({ name: 'extra', cron: '0 0 0 1 1 ? 2099', execute: async () => undefined });
    await zk.ensurePath(registryPaths.jobServers('extra'));
    await worker.add(added);
    let now = await entryOf(zk, 'w1');
    expect(now.jobs).toEqual(['extra', 'reg0', 'reg1']);
    expect(await zk.exists(registryPaths.jobServer('extra', '10.0.0.7'))).not.toBeNull();
    // The list it replaced is gone.
    expect(await zk.exists(registryPaths.jobListPart(before.jobs.list, 0))).toBeNull();
    await worker.remove('reg0');
    now = await entryOf(zk, 'w1');
    expect(now.jobs).toEqual(['extra', 'reg1']);
    const version = now.stat.version;
    await worker.setState('draining');
    now = await entryOf(zk, 'w1');
    expect(now.entry.state).toBe('draining');
    expect(now.stat.version).toBe(version + 1);
    await worker.unregister();
    expect(await zk.exists(registryPaths.instance('w1'))).toBeNull();
    expect(await zk.children(registryPaths.jobLists())).toEqual([]);
  });
});

describe('instance registration order', () => {
  it('writes the configs of the jobs that fire soonest first', async () => {
    const namespace = uniqueNamespace('reg');
    const zk = await connectZk(server.connectionString, { namespace });
    // 1,100 jobs that never fire before 2099, then 100 every-second ones, defined last.
    const rare = jobs(1_100);
    const frequent = Array.from({ length: 100 }, (_, i) => defineJob({ name: `often${i}`, cron: '* * * * * ?', execute: async () => undefined }));
    await new InstanceRegistration(zk, { namespace, instanceId: 'w1', ip: '10.0.0.7', jobs: [...rare, ...frequent], log: silentLogger }).register();
    const czxid = async (path: string) => BigInt(`0x${(await zk.exists(path))!.czxid}`);
    expect(await czxid(registryPaths.jobConfig('often0'))).toBeLessThan(await czxid(registryPaths.jobConfig('reg0')));
    expect((await entryOf(zk, 'w1')).jobs).toHaveLength(1_200);
  });
});
