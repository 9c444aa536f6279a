import { decodeRecentEntry, encodeRecentEntry } from '../../src/history/recent-entry';
import { executionRecord } from '../helpers/execution-records';

describe('recent-list entry', () => {
  it('stores a completed run as a short array without the job or field names, and reads it back whole', () => {
    const record = executionRecord({ item: 3 });
    const entry = encodeRecentEntry(record);
    expect(JSON.parse(entry)).toEqual([1, 3, record.fireTime, 'NORMAL', '10.0.0.7@-@4242', 'completed', 1, record.startedAt, 120]);
    expect(entry.length).toBeLessThan(JSON.stringify(record).length / 2);
    expect(decodeRecentEntry(entry, 'billing')).toEqual(record);
  });

  it('keeps every optional field, and a finishedAt that is not startedAt + durationMs', () => {
    const record = executionRecord({
      status: 'failed',
      attempts: 3,
      error: { name: 'Error', message: 'boom' },
      reason: 'timeout after 5000 ms',
      processed: 10,
      failed: 2,
      exitCode: 1,
      httpStatus: 500,
      finishedAt: executionRecord().startedAt + 999,
    });
    expect(decodeRecentEntry(encodeRecentEntry(record), 'billing')).toEqual(record);
  });

  it('still reads records stored as objects by earlier versions', () => {
    const record = executionRecord({ status: 'skipped', attempts: 0, reason: 'misfire off' });
    expect(decodeRecentEntry(JSON.stringify(record), 'billing')).toEqual(record);
  });

  it.each([
    ['not JSON', '{nope', /JSON/],
    ['another version', JSON.stringify([2, 0, 1, 'NORMAL', 'i', 'completed', 1, 1, 0]), /form 1/],
    ['too few fields', JSON.stringify([1, 0, 1]), /form 1/],
    ['a bad field', JSON.stringify([1, -1, 1, 'NORMAL', 'i', 'completed', 1, 1, 0]), /item/],
    ['a bad status', JSON.stringify([1, 0, 1, 'NORMAL', 'i', 'done', 1, 1, 0]), /status/],
    ['extra not an object', JSON.stringify([1, 0, 1, 'NORMAL', 'i', 'completed', 1, 1, 0, 'x']), /extra/],
    ['a record of another job', JSON.stringify(executionRecord({ job: 'other' })), /"other"/],
  ])('refuses %s, saying what is wrong', (_case, entry, message) => {
    expect(() => decodeRecentEntry(entry, 'billing')).toThrow(message);
  });
});
