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
});
