/**
 * The namespace's instance directory against a real ZooKeeper: entries and their job lists are
 * read and followed, joins, leaves, list changes and state changes are told with the jobs concerned,
 * instances of the same jobs share one set, and unreadable data keeps the last good reading.
 */
import { ErrorCodes } from '../../src/shared/errors';
import { InstanceDirectory, type InstanceDirectoryListener } from '../../src/shared/registry/instance-directory';
import type { InstanceInfo } from '../../src/shared/registry/instance-info';
import { registryPaths } from '../../src/shared/registry/registry-paths';
import type { ZkClient } from '../../src/shared/zk';
import { putInstance, setInstance } from '../helpers/instances';
import { waitFor } from '../helpers/services';
import { closeZkClients, connectZk, uniqueNamespace, useZooKeeperServer } from '../helpers/zk';

const server = useZooKeeperServer();

function info(overrides: Partial<InstanceInfo> = {}): InstanceInfo {
  return { ip: '10.0.0.1', pid: 1, hostname: 'h', queue: 'q1', state: 'ready', version: '1', startedAt: 1, ...overrides };
}

let namespace: string;
let zk: ZkClient;
let writer: ZkClient;
let directories: InstanceDirectory[];

beforeEach(async () => {
  namespace = uniqueNamespace('directory');
  zk = await connectZk(server.connectionString, { namespace });
  writer = await connectZk(server.connectionString, { namespace });
  directories = [];
});

afterEach(async () => {
  await Promise.all(directories.map((d) => d.close()));
  await closeZkClients();
});

/** A started directory whose listener calls are recorded as `event instance [jobs]`. */
async function follow(): Promise<{ directory: InstanceDirectory; seen: string[]; problems: Map<string, unknown> }> {
  const seen: string[] = [];
  const problems = new Map<string, unknown>();
  const tell = (event: string) => (instance: { instanceId: string }, jobs: readonly string[]) => seen.push(`${event} ${instance.instanceId} ${[...jobs].sort().join(',')}`);
  const listener: InstanceDirectoryListener = {
    joined: tell('joined'),
    dropped: tell('dropped'),
    left: tell('left'),
    changed: (instance, previous, jobs) => seen.push(`changed ${instance.instanceId} ${previous.state}->${instance.info.state} ${[...jobs].sort().join(',')}`),
    invalid: (path, error) => problems.set(path, error),
    valid: (path) => problems.delete(path),
  };
  const directory = new InstanceDirectory(zk, { listener });
  directories.push(directory);
  await directory.start();
  return { directory, seen, problems };
}

describe('InstanceDirectory', () => {
  it('reads the instances there at start, and which of them run a job', async () => {
    await putInstance(writer, 'b', info({ queue: 'qb' }), ['j1', 'j2']);
    await putInstance(writer, 'a', info({ queue: 'qa' }), ['j1']);
    const { directory, seen } = await follow();
    expect(seen.sort()).toEqual(['joined a j1', 'joined b j1,j2']);
    expect(directory.instancesOf('j1').map((i) => [i.instanceId, i.info.queue])).toEqual([['a', 'qa'], ['b', 'qb']]);
    expect(directory.instancesOf('j2').map((i) => i.instanceId)).toEqual(['b']);
    expect(directory.instancesOf('none')).toEqual([]);
    expect(directory.instanceOf('j2', 'a')).toBeUndefined();
    expect(directory.instanceOf('j2', 'b')?.queue).toBe('qb');
    expect(Object.isFrozen(directory.instancesOf('j1')[0].info)).toBe(true);
  });

  it('tells joins, list changes, state changes and leaves, each with its jobs', async () => {
    const { directory, seen } = await follow();
    await putInstance(writer, 'w', info(), ['j1', 'j2']);
    await waitFor(() => seen.length === 1, { message: 'join' });
    await setInstance(writer, 'w', info(), ['j2', 'j3']);
    await waitFor(() => seen.length === 3, { message: 'list change' });
    await setInstance(writer, 'w', info({ state: 'draining' }), ['j2', 'j3']);
    await waitFor(() => seen.length === 4, { message: 'state change' });
    await writer.delete(registryPaths.instance('w'));
    await waitFor(() => seen.length === 5, { message: 'leave' });
    expect(seen).toEqual(['joined w j1,j2', 'dropped w j1', 'joined w j3', 'changed w ready->draining j2,j3', 'left w j2,j3']);
    expect(directory.instances()).toEqual([]);
  });

  it('sees an instance go with its session, its list parts with it', async () => {
    const worker = await connectZk(server.connectionString, { namespace });
    await putInstance(worker, 'w', info(), ['j1'], 'ephemeral');
    const { directory, seen } = await follow();
    expect(directory.instancesOf('j1').map((i) => i.instanceId)).toEqual(['w']);
    await worker.close();
    await waitFor(() => seen.includes('left w j1'), { message: 'ephemeral entry gone' });
    expect(await zk.children(registryPaths.jobLists())).toEqual([]);
  });

  it('tells a new incarnation under the same id as the old one leaving, also when its entry is made again at once', async () => {
    await putInstance(writer, 'w', info({ queue: 'q-old' }), ['j1']);
    const { directory, seen } = await follow();
    // The same id with a new queue, as a worker registering again on a new session writes it.
    await setInstance(writer, 'w', info({ queue: 'q-new' }), ['j1']);
    await waitFor(() => directory.instanceOf('j1', 'w')?.queue === 'q-new', { message: 'new incarnation' });
    expect(seen).toEqual(['joined w j1', 'left w j1', 'joined w j1']);
    // Deleted and made again before the directory lists the children: still read anew.
    await writer.delete(registryPaths.instance('w'));
    await putInstance(writer, 'w', info({ queue: 'q-third' }), ['j1']);
    await waitFor(() => directory.instanceOf('j1', 'w')?.queue === 'q-third', { message: 'entry made again' });
    expect(seen.slice(3)).toEqual(['left w j1', 'joined w j1']);
    expect(directory.knownQueues()).toEqual({ queues: new Set(['q-third']), unreadable: new Set() });
  });

  it('knows the queue of a live entry whose list it cannot read, and the id of an entry it cannot decode', async () => {
    await putInstance(writer, 'w', info({ queue: 'qw' }), ['j1']);
    const { directory } = await follow();
    const list = '0123456789abcdef-gone';
    await writer.set(registryPaths.instance('w'), JSON.stringify({ ...info({ queue: 'qw', state: 'draining' }), jobs: { list, parts: 1, count: 1 } }));
    // Its new list is missing, but its state change goes in, and its queue stays known.
    await waitFor(() => directory.instanceOf('j1', 'w')?.state === 'draining', { message: 'state change beside an unreadable list' });
    expect(directory.knownQueues().queues).toEqual(new Set(['qw']));
    // Undecodable after a good reading: its last good queue; never read: its id, queue unknown.
    await putInstance(writer, 'x', info({ queue: 'qx' }), ['j1']);
    await waitFor(() => directory.instanceOf('j1', 'x') !== undefined, { message: 'x read' });
    await writer.set(registryPaths.instance('x'), '{not json');
    await writer.create(registryPaths.instance('y'), '{not json', 'ephemeral');
    await waitFor(() => directory.knownQueues().unreadable.has('y'), { message: 'undecodable entry' });
    expect(directory.knownQueues()).toEqual({ queues: new Set(['qw', 'qx']), unreadable: new Set(['y']) });
  });

  it('keeps one set of names for instances that run the same jobs', async () => {
    await putInstance(writer, 'a', info({ queue: 'qa' }), ['j1', 'j2']);
    const other = await connectZk(server.connectionString, { namespace });
    await putInstance(other, 'b', info({ queue: 'qb' }), ['j2', 'j1']);
    const { directory } = await follow();
    expect(directory.get('a')!.list).not.toBe(directory.get('b')!.list);
    expect(directory.get('a')!.jobs).toBe(directory.get('b')!.jobs);
  });

  it('keeps the last good reading of an unreadable entry and reports it, and reports a corrupt list', async () => {
    await putInstance(writer, 'w', info(), ['j1']);
    const { directory, seen, problems } = await follow();
    await writer.set(registryPaths.instance('w'), '{not json');
    await waitFor(() => problems.has(registryPaths.instance('w')), { message: 'entry reported' });
    // Not a leave: a corrupt write must not look like a dead worker.
    expect(directory.instancesOf('j1').map((i) => i.instanceId)).toEqual(['w']);
    expect(seen).toEqual(['joined w j1']);
    await setInstance(writer, 'w', info({ queue: 'q2' }), ['j1']);
    await waitFor(() => directory.instanceOf('j1', 'w')?.queue === 'q2', { message: 'readable again' });
    expect(problems.has(registryPaths.instance('w'))).toBe(false);

    // An entry whose list holds something that is not a job name.
    const data = JSON.parse((await writer.getText(registryPaths.instance('w')))!) as { jobs: { list: string } };
    await writer.set(registryPaths.jobListPart(data.jobs.list, 0), 'j1');
    const list = '0123456789abcdef-bad';
    await writer.create(registryPaths.jobListPart(list, 0), 'not a job!', 'ephemeral');
    await writer.set(registryPaths.instance('w'), JSON.stringify({ ...info({ queue: 'q2' }), jobs: { list, parts: 1, count: 1 } }));
    await waitFor(() => problems.has(registryPaths.jobListPart(list, 0)), { message: 'list reported' });
    expect((problems.get(registryPaths.jobListPart(list, 0)) as { code: string }).code).toBe(ErrorCodes.CORRUPT_DATA);
    expect(directory.instanceOf('j1', 'w')?.queue).toBe('q2');
  });

  it('answers from memory: a job view asks nothing of ZooKeeper', async () => {
    await putInstance(writer, 'w', info(), ['j1']);
    const { directory } = await follow();
    const reads = [jest.spyOn(zk, 'get'), jest.spyOn(zk, 'children'), jest.spyOn(zk, 'exists')];
    for (let i = 0; i < 100; i += 1) directory.instancesOf('j1');
    expect(reads.flatMap((spy) => spy.mock.calls)).toEqual([]);
  });
});
