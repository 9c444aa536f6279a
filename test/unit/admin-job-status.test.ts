import { describeJob, jobStatus, nextFireTime, summarizeJob, summarizeInstances, type ItemSnapshot, type JobSnapshot } from '../../src/admin';
import { defineJob } from '../../src/shared/config/job-definition';
import type { JobConfig } from '../../src/shared/config/job-config';
import type { FireLedger } from '../../src/shared/registry/fire-ledger';
import type { InstanceInfo } from '../../src/shared/registry/instance-info';

/** 2026-11-25T12:00:00.500Z, a Wednesday. */
const NOW = Date.UTC(2026, 10, 25, 12, 0, 0, 500);

function config(overrides: Record<string, unknown> = {}): JobConfig {
  return defineJob({ name: 'billing', cron: '0/5 * * * * ?', shardingTotalCount: 3, shardingItemParameters: '0=A,2=C', execute: () => undefined, ...overrides }).config;
}

function info(overrides: Partial<InstanceInfo> = {}): InstanceInfo {
  return { ip: '10.0.0.1', pid: 11, hostname: 'host-a', queue: 'q-a', state: 'ready', version: '0.1.0', startedAt: 1_000, ...overrides };
}

function ledger(assignment: Record<string, number[]>, fireTime = NOW - 500): FireLedger {
  return { fireTime, epoch: 3, source: 'NORMAL', assignment, queues: {} };
}

function job(overrides: Partial<JobSnapshot> = {}): JobSnapshot {
  return {
    name: 'billing',
    config: config(),
    instances: [
      { instanceId: 'a', info: info() },
      { instanceId: 'b', info: info({ ip: '10.0.0.2', queue: 'q-b', hostname: 'host-b' }) },
    ],
    servers: new Map([
      ['10.0.0.1', 'ENABLED'],
      ['10.0.0.2', 'ENABLED'],
    ]),
    shardingFlagged: false,
    ledger: ledger({ a: [0, 1], b: [2] }),
    ...overrides,
  };
}

function item(i: number, overrides: Partial<ItemSnapshot> = {}): ItemSnapshot {
  return { item: i, running: false, runningHolder: undefined, disabled: false, failover: false, assignedInstance: undefined, ...overrides };
}

describe('jobStatus', () => {
  it('is OK when a ready instance on an enabled server can run it and the ledger names live instances', () => {
    expect(jobStatus(job())).toBe('OK');
  });

  it('is DISABLED when the config says so, whatever else holds', () => {
    expect(jobStatus(job({ config: config({ disabled: true }), instances: [], shardingFlagged: true }))).toBe('DISABLED');
  });

  it('is CRASHED with no live instance, only draining ones, or only instances on disabled servers', () => {
    expect(jobStatus(job({ instances: [] }))).toBe('CRASHED');
    expect(jobStatus(job({ instances: [{ instanceId: 'a', info: info({ state: 'draining' }) }] }))).toBe('CRASHED');
    const servers = new Map([
      ['10.0.0.1', 'DISABLED'],
      ['10.0.0.2', 'DISABLED'],
    ]);
    expect(jobStatus(job({ servers }))).toBe('CRASHED');
    // A server with no node at all counts as enabled, as the leader reads it.
    expect(jobStatus(job({ servers: new Map() }))).toBe('OK');
  });

  it('is SHARDING_FLAG when flagged for resharding, or when the ledger gives items to an instance that is gone', () => {
    expect(jobStatus(job({ shardingFlagged: true }))).toBe('SHARDING_FLAG');
    expect(jobStatus(job({ ledger: ledger({ a: [0, 1], gone: [2] }) }))).toBe('SHARDING_FLAG');
    // An instance the ledger lists with no items does not matter.
    expect(jobStatus(job({ ledger: ledger({ a: [0, 1, 2], gone: [] }) }))).toBe('OK');
  });
});

describe('nextFireTime', () => {
  it('is the next cron fire after now, in the job time zone', () => {
    expect(nextFireTime(config(), NOW)).toBe(Date.UTC(2026, 10, 25, 12, 0, 5));
    // 09:30 every day in New York (UTC-5 in November) is 14:30 UTC.
    expect(nextFireTime(config({ cron: '0 30 9 * * ?', timeZone: 'America/New_York' }), NOW)).toBe(Date.UTC(2026, 10, 25, 14, 30));
  });

  it('follows time on one config: the same fire until it is reached, the next one from it, and back when the clock goes back', () => {
    const c = config();
    expect(nextFireTime(c, NOW)).toBe(Date.UTC(2026, 10, 25, 12, 0, 5));
    expect(nextFireTime(c, Date.UTC(2026, 10, 25, 12, 0, 4, 999))).toBe(Date.UTC(2026, 10, 25, 12, 0, 5));
    expect(nextFireTime(c, Date.UTC(2026, 10, 25, 12, 0, 5))).toBe(Date.UTC(2026, 10, 25, 12, 0, 10));
    expect(nextFireTime(c, Date.UTC(2026, 10, 25, 12, 0, 7))).toBe(Date.UTC(2026, 10, 25, 12, 0, 10));
    expect(nextFireTime(c, Date.UTC(2026, 10, 25, 11, 59, 0))).toBe(Date.UTC(2026, 10, 25, 11, 59, 5));
  });

  it('is null for a trigger-only job and for a disabled one', () => {
    expect(nextFireTime(config({ cron: undefined }), NOW)).toBeNull();
    expect(nextFireTime(config({ disabled: true }), NOW)).toBeNull();
  });
});

describe('summarizeJob', () => {
  it('gives the console list entry', () => {
    expect(summarizeJob(job(), NOW)).toEqual({
      name: 'billing',
      type: 'SIMPLE',
      cron: '0/5 * * * * ?',
      timeZone: 'UTC',
      shardingTotalCount: 3,
      status: 'OK',
      instances: 2,
      nextFireTime: Date.UTC(2026, 10, 25, 12, 0, 5),
      lastFireTime: NOW - 500,
    });
  });

  it('has null times for a trigger-only job that never fired', () => {
    const summary = summarizeJob(job({ config: config({ cron: undefined }), ledger: undefined }), NOW);
    expect(summary).toMatchObject({ cron: null, nextFireTime: null, lastFireTime: null });
  });
});

describe('describeJob', () => {
  it('gives each item below the total its parameter, status, instance and failover flag', () => {
    const detail = describeJob(
      job(),
      [
        item(0, { running: true, runningHolder: 'b', assignedInstance: 'a', failover: true }),
        item(1, { disabled: true, assignedInstance: 'a' }),
        item(2, { assignedInstance: 'b' }),
        item(7, { running: true, runningHolder: 'a' }),
      ],
      NOW,
    );
    expect(detail.items).toEqual([
      { item: 0, parameter: 'A', status: 'RUNNING', instanceId: 'b', failover: true },
      { item: 1, parameter: '', status: 'DISABLED', instanceId: 'a', failover: false },
      { item: 2, parameter: 'C', status: 'PENDING', instanceId: 'b', failover: false },
    ]);
    expect(detail).toMatchObject({ name: 'billing', status: 'OK', nextFireTime: Date.UTC(2026, 10, 25, 12, 0, 5), lastFireTime: NOW - 500 });
    expect(detail.config).toEqual(config());
  });

  it('shows an item disabled while it runs as RUNNING until it ends', () => {
    const [first] = describeJob(job(), [item(0, { running: true, runningHolder: 'a', disabled: true })], NOW).items;
    expect(first.status).toBe('RUNNING');
  });

  it('falls back to the ledger for the assigned instance, and to null when nothing assigns the item', () => {
    const detail = describeJob(job({ ledger: ledger({ a: [0], b: [1] }) }), [], NOW);
    expect(detail.items.map((i) => [i.instanceId, i.status])).toEqual([
      ['a', 'PENDING'],
      ['b', 'PENDING'],
      [null, 'PENDING'],
    ]);
  });

  it('marks SHARDING_FLAG every item not running or disabled when the job is flagged', () => {
    const detail = describeJob(job({ shardingFlagged: true }), [item(0, { running: true, runningHolder: 'a' }), item(1, { disabled: true })], NOW);
    expect(detail.items.map((i) => i.status)).toEqual(['RUNNING', 'DISABLED', 'SHARDING_FLAG']);
    expect(detail.status).toBe('SHARDING_FLAG');
  });

  it('marks SHARDING_FLAG an item assigned to an instance that is no longer live', () => {
    const detail = describeJob(job({ ledger: undefined }), [item(0, { assignedInstance: 'gone' }), item(1, { assignedInstance: 'a' })], NOW);
    expect(detail.items.map((i) => [i.instanceId, i.status])).toEqual([
      ['gone', 'SHARDING_FLAG'],
      ['a', 'PENDING'],
      [null, 'PENDING'],
    ]);
  });

  it('shows the assigned instance for a running item whose lock names no holder', () => {
    const [first] = describeJob(job(), [item(0, { running: true, runningHolder: undefined, assignedInstance: 'a' })], NOW).items;
    expect(first).toMatchObject({ status: 'RUNNING', instanceId: 'a' });
  });
});

describe('summarizeInstances', () => {
  it('gives one entry per instance with the jobs of its list, sorted', () => {
    const a = info();
    const b = info({ ip: '10.0.0.2', pid: 22, hostname: 'host-b', queue: 'q-b' });
    const instances = summarizeInstances([
      { instanceId: 'b', info: b, jobs: new Set(['zeta', 'alpha']) },
      { instanceId: 'a', info: a, jobs: new Set(['alpha']) },
    ]);
    expect(instances).toEqual([
      { instanceId: 'a', ip: '10.0.0.1', hostname: 'host-a', pid: 11, state: 'ready', queue: 'q-a', jobs: ['alpha'] },
      { instanceId: 'b', ip: '10.0.0.2', hostname: 'host-b', pid: 22, state: 'ready', queue: 'q-b', jobs: ['alpha', 'zeta'] },
    ]);
  });

  it('lists only the jobs the reader knows, and an instance whose jobs it knows none of with none', () => {
    const known = (job: string) => job !== 'gone';
    expect(summarizeInstances([{ instanceId: 'a', info: info({ state: 'draining' }), jobs: ['j2', 'gone', 'j1'] }], known)[0]).toMatchObject({ state: 'draining', jobs: ['j1', 'j2'] });
    expect(summarizeInstances([{ instanceId: 'a', info: info(), jobs: ['gone'] }], known)[0].jobs).toEqual([]);
  });
});
