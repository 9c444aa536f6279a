import type { JobDetail, JobSummary } from '../../src/admin';
import { instanceLines, jobDetailLines, jobListLines, problemLines } from '../../src/cli/admin-output';
import { formatTable, formatTime } from '../../src/cli/text-table';
import { defineJob } from '../../src/shared/config/job-definition';
import { ErrorCodes } from '../../src/shared/errors';

const T = Date.UTC(2026, 10, 25, 12, 0, 5);

describe('formatTable', () => {
  it('pads every column but the last to its widest cell, two spaces apart, and shows empty cells as -', () => {
    expect(formatTable([
      ['A', 'BB', 'C'],
      ['long value', '', 7],
    ])).toEqual(['A           BB  C', 'long value  -   7']);
  });
});

describe('formatTime', () => {
  it('prints ISO 8601 UTC, milliseconds only when there are some, and - for null', () => {
    expect(formatTime(T)).toBe('2026-11-25T12:00:05Z');
    expect(formatTime(T + 1)).toBe('2026-11-25T12:00:05.001Z');
    expect(formatTime(null)).toBe('-');
  });
});

describe('admin output', () => {
  const summary: JobSummary = { name: 'billing', type: 'SIMPLE', cron: '0/5 * * * * ?', timeZone: 'UTC', shardingTotalCount: 3, status: 'OK', instances: 2, nextFireTime: T, lastFireTime: null };

  it('lists jobs as an aligned table, a trigger-only job without a cron', () => {
    const lines = jobListLines([summary, { ...summary, name: 'adhoc', cron: null, nextFireTime: null, status: 'CRASHED', instances: 0 }], 'ns');
    expect(lines).toEqual([
      'NAME     STATUS   TYPE    CRON            TIME ZONE  ITEMS  INSTANCES  NEXT FIRE             LAST FIRE',
      'billing  OK       SIMPLE  0/5 * * * * ?   UTC        3      2          2026-11-25T12:00:05Z  -',
      'adhoc    CRASHED  SIMPLE  (trigger only)  UTC        3      0          -                     -',
    ]);
    expect(jobListLines([], 'ns')).toEqual(['No jobs in namespace ns.']);
  });

  it('shows a job: status, times and every config field by its stored name, then its items', () => {
    const config = defineJob({ name: 'billing', cron: '0/5 * * * * ?', shardingTotalCount: 2, shardingItemParameters: '0=A', execute: () => undefined }).config;
    const detail: JobDetail = {
      name: 'billing',
      status: 'OK',
      config,
      nextFireTime: T,
      lastFireTime: T - 5_000,
      items: [
        { item: 0, parameter: 'A', status: 'RUNNING', instanceId: 'w1', failover: true },
        { item: 1, parameter: '', status: 'PENDING', instanceId: null, failover: false },
      ],
    };
    const lines = jobDetailLines(detail);
    expect(lines.slice(0, 4)).toEqual(['name                      billing', 'status                    OK', 'next fire                 2026-11-25T12:00:05Z', 'last fire                 2026-11-25T12:00:00Z']);
    expect(lines).toContain('shardingItemParameters    0=A');
    expect(lines).toContain('jobParameter              ""');
    expect(lines).toContain('failover                  false');
    expect(lines.slice(-4)).toEqual(['', 'ITEM  PARAMETER  STATUS   INSTANCE  FAILOVER', '0     A          RUNNING  w1        yes', '1     -          PENDING  -         -']);
  });

  it('lists instances with their jobs', () => {
    expect(instanceLines([{ instanceId: 'w1', ip: '10.0.0.1', hostname: 'h1', pid: 42, state: 'ready', queue: 'ns.w1.1a', jobs: ['a', 'b'] }], 'ns')).toEqual([
      'INSTANCE  IP        HOSTNAME  PID  STATE  JOBS  QUEUE',
      'w1        10.0.0.1  h1        42   ready  a,b   ns.w1.1a',
    ]);
    expect(instanceLines([], 'ns')).toEqual(['No live instances in namespace ns.']);
  });

  it('names the path of each unreadable node', () => {
    expect(problemLines([
      { path: '/a/config', code: ErrorCodes.CORRUPT_DATA, message: 'Invalid job "a": corrupt config at /a/config: not valid JSON' },
      { path: '/a/servers/x', code: ErrorCodes.CORRUPT_DATA, message: 'bad value' },
    ])).toEqual(['warning: Invalid job "a": corrupt config at /a/config: not valid JSON', 'warning: /a/servers/x: bad value']);
  });
});
