import { buildJobList, JOB_LIST_PART_BYTES, jobListHash } from '../../src/shared/registry/job-lists';
import { instanceEntryCodec } from '../../src/shared/registry/instance-info';
import { registryPaths } from '../../src/shared/registry/registry-paths';

describe('buildJobList', () => {
  it('sorts and dedupes the names; equal lists share their hash, each writer has its own name', () => {
    const a = buildJobList(['b', 'a', 'b'], '0x1000aa');
    const b = buildJobList(['a', 'b'], '0x2000bb');
    expect(a.parts).toEqual(['a\nb']);
    expect(a.ref).toMatchObject({ parts: 1, count: 2 });
    expect(jobListHash(a.ref.list)).toBe(jobListHash(b.ref.list));
    expect(a.ref.list).not.toBe(b.ref.list);
    expect(jobListHash(buildJobList(['a', 'c'], '0x1000aa').ref.list)).not.toBe(jobListHash(a.ref.list));
    // The name is a valid node name and a valid entry field.
    expect(() => registryPaths.jobListPart(a.ref.list, 0)).not.toThrow();
    expect(() => instanceEntryCodec.decode(instanceEntryCodec.encode({ ip: '1', pid: 1, hostname: 'h', queue: 'q', state: 'ready', version: '1', startedAt: 1, jobs: a.ref }), '/x')).not.toThrow();
  });

  it('splits 100,000 names into parts under the part size, and keeps every name', () => {
    const names = Array.from({ length: 100_000 }, (_, i) => `job-with-a-longer-name-${String(i).padStart(6, '0')}`);
    const { ref, parts } = buildJobList(names, '0x1');
    expect(parts.length).toBeGreaterThan(1);
    expect(ref).toMatchObject({ parts: parts.length, count: 100_000 });
    for (const part of parts) expect(Buffer.byteLength(part)).toBeLessThanOrEqual(JOB_LIST_PART_BYTES);
    expect(parts.flatMap((p) => p.split('\n'))).toEqual([...names].sort());
  });

  it('writes an empty list as no part', () => {
    expect(buildJobList([], '0x1')).toMatchObject({ ref: { parts: 0, count: 0 }, parts: [] });
  });
});
