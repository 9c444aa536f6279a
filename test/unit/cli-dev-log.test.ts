import { clockTime, DevLogRenderer } from '../../src/cli/dev-log';

const at = (hh: number, mm: number, ss: number, ms = 0) => new Date(2026, 0, 15, hh, mm, ss, ms).getTime();
const launchedAt = at(12, 0, 0);
const renderer = () => new DevLogRenderer({ launchedAt, jobNames: ['settle-accounts', 'heartbeat'] });
const line = (fields: Record<string, unknown>) => JSON.stringify({ level: 30, time: at(12, 0, 5, 12), pid: 1, hostname: 'h', name: 'shardcron', ...fields });

const finished = {
  msg: 'item finished', job: 'settle-accounts', item: 2, fireTime: at(12, 0, 5), instanceId: 'worker-2',
  source: 'NORMAL', status: 'completed', durationMs: 12, shardingTotalCount: 3, shardingParameter: 'C',
};

describe('DevLogRenderer', () => {
  it('renders an execution with its fire time, item, parameter, instance and duration; the first one says when it started', () => {
    const r = renderer();
    expect(r.render('worker-2', line(finished), 0)).toEqual([
      '12:00:05  settle-accounts  item 2/3 (C)  ran on worker-2  12 ms  first run, started 5.0 s after launch',
    ]);
    expect(r.render('worker-2', line({ ...finished, item: 0, shardingParameter: 'A' }), 0)).toEqual([
      '12:00:05  settle-accounts  item 0/3 (A)  ran on worker-2  12 ms',
    ]);
  });

  it('aligns job names and shows status, source and reason when they are not the usual', () => {
    const r = renderer();
    r.render('w', line({ ...finished, job: 'heartbeat' }), 0);
    const failover = { ...finished, job: 'heartbeat', item: 0, shardingTotalCount: 1, shardingParameter: undefined, instanceId: 'worker-1', source: 'FAILOVER', status: 'aborted', durationMs: 800 };
    expect(r.render('worker-1', line(failover), 0)).toEqual(['12:00:05  heartbeat        item 0/1  aborted on worker-1  800 ms  FAILOVER']);
    const skipped = { ...failover, source: 'NORMAL', status: 'skipped', durationMs: 0, reason: 'job disabled' };
    expect(r.render('worker-1', line(skipped), 0)).toEqual(['12:00:05  heartbeat        item 0/1  skipped on worker-1  0 ms  (job disabled)']);
  });

  it('reports leadership, start and stop of a node', () => {
    const r = renderer();
    expect(r.render('scheduler-1', line({ msg: 'leadership acquired', epoch: 4 }), 0)).toEqual(['12:00:05  scheduler-1 is the leader now (epoch 4)']);
    expect(r.render('scheduler-1', line({ level: 40, msg: 'leadership lost', reason: 'session-lost' }), 0)).toEqual([
      '12:00:05  scheduler-1 is no longer the leader (session-lost)',
    ]);
    expect(r.render('worker-1', line({ msg: 'node started', roles: ['worker'] }), 0)).toEqual(['12:00:05  worker-1 is up (worker)']);
    expect(r.render('worker-1', line({ msg: 'shutting down', signal: 'SIGTERM' }), 0)).toEqual(['12:00:05  worker-1 is shutting down (SIGTERM)']);
    expect(r.render('worker-1', line({ msg: 'node closed' }), 0)).toEqual(['12:00:05  worker-1 stopped']);
  });

  it('shows warnings and errors with their job and cause, and hides other info and debug lines', () => {
    const r = renderer();
    expect(r.render('worker-3', line({ level: 50, msg: 'job execution failed', job: 'heartbeat', item: 0, err: { message: 'boom' } }), 0)).toEqual([
      '12:00:05  worker-3  ERROR [heartbeat item 0] job execution failed: boom',
    ]);
    expect(r.render('worker-3', line({ level: 40, msg: 'no PostgreSQL; using memory' }), 0)).toEqual(['12:00:05  worker-3  WARN no PostgreSQL; using memory']);
    expect(r.render('worker-3', line({ msg: 'ZooKeeper connection state' }), 0)).toEqual([]);
    expect(r.render('worker-3', line({ level: 20, msg: 'item started', job: 'heartbeat' }), 0)).toEqual([]);
  });

  it('passes other output through, stamped with the time it arrived', () => {
    const r = renderer();
    expect(r.render('worker-1', 'TypeError: boom', at(12, 1, 2))).toEqual(['12:01:02  worker-1 | TypeError: boom']);
    expect(r.render('worker-1', '{not json', at(12, 1, 2))).toEqual(['12:01:02  worker-1 | {not json']);
    expect(r.render('worker-1', '   ', at(12, 1, 2))).toEqual([]);
  });

  it('formats local wall-clock time as HH:MM:SS', () => {
    expect(clockTime(at(7, 5, 9, 999))).toBe('07:05:09');
  });
});
