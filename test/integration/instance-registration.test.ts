/**
 * A worker's registration (DESIGN.md flow 1) against a real ZooKeeper: instance nodes are created
 * by the hundred in multis, a multi that meets a node already there falls back to one job at a time
 * (which replaces a node of our own and refuses one of another live process), and a worker joining a
 * namespace leaves the nodes it finds as they are.
 */
import { defineJob } from '../../src';
import { ErrorCodes } from '../../src/shared/errors';
import { silentLogger } from '../../src/shared/logger';
import { registryPaths } from '../../src/shared/registry/registry-paths';
import { InstanceRegistration } from '../../src/worker/instance-registration';
import { closeZkClients, connectZk, uniqueNamespace, useZooKeeperServer } from '../helpers/zk';

const server = useZooKeeperServer();

afterEach(async () => {
  await closeZkClients();
});

const jobs = (count: number) => Array.from({ length: count }, (_, i) => defineJob({ name: `reg${i}`, cron: '0 0 0 1 1 ? 2099', execute: async () => undefined }));

const registration = (zk: Awaited<ReturnType<typeof connectZk>>, namespace: string, instanceId: string, count: number) =>
  new InstanceRegistration(zk, { namespace, instanceId, ip: '10.0.0.7', jobs: jobs(count), log: silentLogger });

describe('instance registration', () => {
  it('registers 250 jobs: every instance node is ours, and a second worker joining leaves configs and servers as they were', async () => {
    const namespace = uniqueNamespace('reg');
    const zk = await connectZk(server.connectionString, { namespace });
    const { queue } = await registration(zk, namespace, 'w1', 250).register();
    for (const i of [0, 99, 100, 249]) {
      const stat = await zk.exists(registryPaths.jobInstance(`reg${i}`, 'w1'));
      expect(stat?.ephemeralOwner).toBe(zk.sessionId);
      expect(JSON.parse((await zk.getText(registryPaths.jobInstance(`reg${i}`, 'w1')))!).queue).toBe(queue);
    }
    // A job new to the namespace got its nodes in one transaction: they share the zxid of their creation.
    const created = await Promise.all([registryPaths.job('reg42'), registryPaths.jobConfig('reg42'), registryPaths.jobServers('reg42'), registryPaths.jobServer('reg42', '10.0.0.7'), registryPaths.jobInstances('reg42')].map((p) => zk.exists(p)));
    expect(new Set(created.map((stat) => stat!.czxid)).size).toBe(1);
    // Every transaction, a failed create too, takes a zxid: two probe nodes bracket the second worker's.
    const zxid = async (name: string) => {
      await zk.create(`/${name}`, '');
      return BigInt(`0x${(await zk.exists(`/${name}`))!.czxid}`);
    };
    const before = await zxid('probe-before');
    const other = await connectZk(server.connectionString, { namespace });
    await registration(other, namespace, 'w2', 250).register();
    const after = await zxid('probe-after');
    expect((await zk.children(registryPaths.jobInstances('reg249'))).sort()).toEqual(['w1', 'w2']);
    // Three multis of instance nodes (100, 100, 50) and the clock check; no create of a config,
    // server or instances node that is there (750 failed creates before).
    expect(Number(after - before)).toBeLessThanOrEqual(10);
  });

  it('two workers registering the same new jobs at once both register; each job node is made once', async () => {
    const namespace = uniqueNamespace('reg');
    const [a, b] = await Promise.all([connectZk(server.connectionString, { namespace }), connectZk(server.connectionString, { namespace })]);
    await Promise.all([registration(a, namespace, 'w1', 150).register(), registration(b, namespace, 'w2', 150).register()]);
    for (const i of [0, 75, 149]) {
      expect((await a.children(registryPaths.jobInstances(`reg${i}`))).sort()).toEqual(['w1', 'w2']);
      expect(await a.children(registryPaths.jobServers(`reg${i}`))).toEqual(['10.0.0.7']);
      expect(JSON.parse((await a.getText(registryPaths.jobConfig(`reg${i}`)))!)).toMatchObject({ name: `reg${i}` });
    }
  });

  it('a node of another live process with the same instance id in one multi: the rest register, and that job is refused by name', async () => {
    const namespace = uniqueNamespace('reg');
    const first = await connectZk(server.connectionString, { namespace });
    await registration(first, namespace, 'w1', 1).register();
    const second = await connectZk(server.connectionString, { namespace });
    const error = await registration(second, namespace, 'w1', 150).register().then(() => undefined, (err: unknown) => err);
    expect(error).toMatchObject({ code: ErrorCodes.INVALID_CONFIG, details: { job: 'reg0', instanceId: 'w1', field: 'SHARDCRON_INSTANCE_ID' } });
    // The multi of reg0..reg99 failed on reg0; its other jobs were registered one by one, and the next multi as it was.
    expect((await second.exists(registryPaths.jobInstance('reg1', 'w1')))?.ephemeralOwner).toBe(second.sessionId);
    expect((await second.exists(registryPaths.jobInstance('reg149', 'w1')))?.ephemeralOwner).toBe(second.sessionId);
    expect((await second.exists(registryPaths.jobInstance('reg0', 'w1')))?.ephemeralOwner).toBe(first.sessionId);
  });

  it('a node of the same instance id whose process goes away while we wait is taken over', async () => {
    const namespace = uniqueNamespace('reg');
    const first = await connectZk(server.connectionString, { namespace });
    await registration(first, namespace, 'w1', 1).register();
    const second = await connectZk(server.connectionString, { namespace });
    const registering = registration(second, namespace, 'w1', 120).register();
    setTimeout(() => void first.close(), 300);
    await registering;
    expect((await second.exists(registryPaths.jobInstance('reg0', 'w1')))?.ephemeralOwner).toBe(second.sessionId);
    expect((await second.children(registryPaths.jobInstances('reg119')))).toEqual(['w1']);
  });

  it('asks ZooKeeper only for configs not known stored, and still writes a missing one', async () => {
    const namespace = uniqueNamespace('reg');
    const zk = await connectZk(server.connectionString, { namespace });
    await registration(zk, namespace, 'w1', 3).register();
    // A second worker whose config watches read reg0 and reg1 but not reg2 (say, not loaded yet);
    // reg2's config was removed meanwhile, so the registration must find that out and write it.
    await zk.delete(registryPaths.jobConfig('reg2'));
    const other = await connectZk(server.connectionString, { namespace });
    const exists = jest.spyOn(other, 'exists');
    const known = new Set(['reg0', 'reg1']);
    await new InstanceRegistration(other, { namespace, instanceId: 'w2', ip: '10.0.0.7', jobs: jobs(3), log: silentLogger, configStored: async (job) => known.has(job) }).register();
    const asked = exists.mock.calls.map(([path]) => path);
    expect(asked).not.toContain(registryPaths.jobConfig('reg0'));
    expect(asked).not.toContain(registryPaths.jobConfig('reg1'));
    expect(asked).toContain(registryPaths.jobConfig('reg2'));
    expect(JSON.parse((await zk.getText(registryPaths.jobConfig('reg2')))!)).toMatchObject({ name: 'reg2' });
    expect((await zk.children(registryPaths.jobInstances('reg2'))).sort()).toEqual(['w1', 'w2']);
  });

  it("makes a job's missing `instances/` node with its instance node", async () => {
    const namespace = uniqueNamespace('reg');
    const zk = await connectZk(server.connectionString, { namespace });
    await registration(zk, namespace, 'w1', 2).register();
    // Another tool left reg1 without `instances/` (the config and the server are there).
    await zk.close();
    const other = await connectZk(server.connectionString, { namespace });
    await waitForNoChildren(other, registryPaths.jobInstances('reg1'));
    await other.delete(registryPaths.jobInstances('reg1'));
    await registration(other, namespace, 'w2', 2).register();
    expect((await other.exists(registryPaths.jobInstance('reg1', 'w2')))?.ephemeralOwner).toBe(other.sessionId);
    expect(await other.children(registryPaths.jobInstances('reg0'))).toEqual(['w2']);
  });
});

describe('instance registration order', () => {
  it('registers the jobs that fire soonest first, and creates their instance nodes before it writes the later groups', async () => {
    const namespace = uniqueNamespace('reg');
    const zk = await connectZk(server.connectionString, { namespace });
    // 1,100 jobs that never fire before 2099, then 100 every-second ones, defined last.
    const rare = jobs(1_100);
    const frequent = Array.from({ length: 100 }, (_, i) => defineJob({ name: `often${i}`, cron: '* * * * * ?', execute: async () => undefined }));
    await new InstanceRegistration(zk, { namespace, instanceId: 'w1', ip: '10.0.0.7', jobs: [...rare, ...frequent], log: silentLogger }).register();
    const czxid = async (path: string) => BigInt(`0x${(await zk.exists(path))!.czxid}`);
    // The every-second jobs went into the first group of 1,000; the last rare jobs into the second.
    const frequentInstance = await czxid(registryPaths.jobInstance('often99', 'w1'));
    expect(frequentInstance).toBeLessThan(await czxid(registryPaths.jobConfig('reg1099')));
    expect(await czxid(registryPaths.jobConfig('often0'))).toBeLessThan(await czxid(registryPaths.jobConfig('reg0')));
    expect((await zk.exists(registryPaths.jobInstance('reg1099', 'w1')))?.ephemeralOwner).toBe(zk.sessionId);
  });
});

/** Waits until `path` has no children (the ephemeral nodes of a closed session are gone). */
async function waitForNoChildren(zk: Awaited<ReturnType<typeof connectZk>>, path: string): Promise<void> {
  for (let i = 0; i < 100 && (await zk.children(path)).length > 0; i += 1) await new Promise((r) => setTimeout(r, 50));
}
