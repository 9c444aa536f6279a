import { applyConfigUpdate, newTriggerRequestId, parseItemNumber } from '../../src/admin';
import { defineJob } from '../../src/shared/config/job-definition';
import { ConfigError, ErrorCodes } from '../../src/shared/errors';
import { registryPaths } from '../../src/shared/registry/registry-paths';

const stored = defineJob({ name: 'billing', cron: '0/5 * * * * ?', shardingTotalCount: 3, execute: () => undefined }).config;

/** The ConfigError `run` throws, as `field: message` lines. */
function issuesOf(run: () => unknown): string[] {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).code).toBe(ErrorCodes.INVALID_CONFIG);
    return (err as ConfigError).issues.map((i) => `${i.field}: ${i.message}`);
  }
  throw new Error('expected a ConfigError');
}

describe('applyConfigUpdate', () => {
  it('merges the update into the stored config and returns it frozen, in canonical field order', () => {
    const next = applyConfigUpdate(stored, { shardingTotalCount: 5, cron: '0 0 * * * ?', timeZone: 'Europe/Berlin', name: 'billing' });
    expect(next).toMatchObject({ name: 'billing', shardingTotalCount: 5, cron: '0 0 * * * ?', timeZone: 'Europe/Berlin', failover: false });
    expect(Object.isFrozen(next)).toBe(true);
    expect(Object.keys(next)[0]).toBe('name');
  });

  it('removes the cron with cron: null (a trigger-only job)', () => {
    const next = applyConfigUpdate(stored, { cron: null });
    expect(next.cron).toBeUndefined();
    expect('cron' in next).toBe(false);
  });

  it('removes any other field with null: an optional one is unset, one with a default takes it again', () => {
    const limited = applyConfigUpdate(stored, { timeoutMs: 5_000, retry: { attempts: 3, backoffMs: 100 }, failover: true, description: 'x' });
    expect(limited).toMatchObject({ timeoutMs: 5_000, retry: { attempts: 3, backoffMs: 100 }, failover: true, description: 'x' });
    const cleared = applyConfigUpdate(limited, { timeoutMs: null, retry: null, failover: null, description: null });
    expect('timeoutMs' in cleared).toBe(false);
    expect('retry' in cleared).toBe(false);
    expect(cleared.failover).toBe(stored.failover);
    expect(cleared.description).toBe(stored.description);
    // A field that is not set yet: null changes nothing. An unknown one is still refused, null or not.
    expect(applyConfigUpdate(stored, { timeoutMs: null })).toEqual(stored);
    expect(issuesOf(() => applyConfigUpdate(stored, { timeoutMS: null }))).toEqual([expect.stringMatching(/^timeoutMS: /)]);
  });

  it('names every bad field at once: values, unknown fields (with a hint), name and type changes', () => {
    const issues = issuesOf(() =>
      applyConfigUpdate(stored, { name: 'other', type: 'SCRIPT', shardingTotalCount: 0, failover: 'yes', shardingTotalcount: 4, cron: 'every minute' }),
    );
    expect(issues).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^name: cannot be changed \(stored: "billing"\)/),
        expect.stringMatching(/^type: cannot be changed \(stored: "SIMPLE"\)/),
        expect.stringMatching(/^shardingTotalCount: 0 is out of range/),
        expect.stringMatching(/^failover: expected true or false, got "yes"/),
        expect.stringMatching(/^shardingTotalcount: unknown field \(did you mean shardingTotalCount\?\)/),
        expect.stringMatching(/^cron: Invalid cron expression "every minute"/),
      ]),
    );
    expect(issues).toHaveLength(6);
  });

  it('checks the cron in the time zone of the merged config, as defineJob does', () => {
    expect(issuesOf(() => applyConfigUpdate(stored, { timeZone: 'Mars/Olympus' }))).toEqual([expect.stringMatching(/^timeZone: "Mars\/Olympus" is not an IANA time zone/)]);
  });

  it('refuses what is not an object', () => {
    for (const update of [null, 'x', [1], 3]) expect(issuesOf(() => applyConfigUpdate(stored, update))).toEqual([expect.stringMatching(/^\(root\): expected an object/)]);
  });
});

describe('parseItemNumber', () => {
  it('accepts non-negative integers, as numbers or decimal text', () => {
    expect(parseItemNumber(0)).toBe(0);
    expect(parseItemNumber('12')).toBe(12);
  });

  it('refuses anything else, naming the field', () => {
    for (const bad of [-1, 1.5, '01', '-1', 'x', '', NaN, undefined, '1e3']) {
      expect(issuesOf(() => parseItemNumber(bad, '--item'))).toEqual([expect.stringMatching(/^--item: .* is not a sharding item number/)]);
    }
  });
});

describe('newTriggerRequestId', () => {
  it('is a valid node name that sorts by request time as text, unique per call', () => {
    const early = newTriggerRequestId(Date.UTC(2026, 0, 1));
    const late = newTriggerRequestId(Date.UTC(2026, 0, 1) + 1);
    expect(early).toMatch(/^\d{13}-[0-9a-f]{12}$/);
    expect(early < late).toBe(true);
    expect(newTriggerRequestId(5)).toMatch(/^0000000000005-/);
    const ids = new Set(Array.from({ length: 1000 }, () => newTriggerRequestId(1)));
    expect(ids.size).toBe(1000);
    expect(registryPaths.trigger('billing', early)).toBe(`/billing/trigger/${early}`);
  });
});
