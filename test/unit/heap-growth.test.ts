import { execFileSync } from 'node:child_process';
import v8 from 'node:v8';
import path from 'node:path';
import { applyHeapGrowth, DEFAULT_HEAP_GROWTH_PERCENT, defaultHeapGrowthPercent, heapGrowthNow, LOADING_HEAP_GROWTH_PERCENT, tightenHeapGrowth } from '../../src/shared/heap-growth';

const CHURN = path.join(__dirname, '..', 'fixtures', 'heap-churn.ts');

function churn(percent: number): { applied: { kind: string }; maxHeapTotalMb: number } {
  const out = execFileSync(process.execPath, ['--require', 'tsx/cjs', CHURN, String(percent)], { encoding: 'utf8', timeout: 60_000 });
  return JSON.parse(out) as { applied: { kind: string }; maxHeapTotalMb: number };
}

describe('applyHeapGrowth', () => {
  it('leaves a --heap-growing-percent given to node alone, in either spelling', () => {
    expect(applyHeapGrowth(50, ['--inspect', '--heap-growing-percent=20'])).toEqual({ kind: 'node-flag', flag: '--heap-growing-percent=20' });
    expect(applyHeapGrowth(50, ['--heap_growing_percent=10'])).toEqual({ kind: 'node-flag', flag: '--heap_growing_percent=10' });
    expect(applyHeapGrowth(50, ['--heap-growing-percentage=1'])).toEqual({ kind: 'set', percent: 50 });
  });

  it('refuses a percent that is not an integer from 0 to 400, naming the option', () => {
    for (const bad of [-1, 401, 12.5, Number.NaN]) {
      expect(() => applyHeapGrowth(bad, [])).toThrow(expect.objectContaining({ code: 'SHARDCRON_INVALID_CONFIG', message: expect.stringContaining('heapGrowthPercent') }));
    }
  });

  it('defaults to 50% on a node with the scheduler role, 30% on the others', () => {
    expect(DEFAULT_HEAP_GROWTH_PERCENT).toBe(50);
    expect(defaultHeapGrowthPercent(['scheduler'])).toBe(50);
    expect(defaultHeapGrowthPercent(['worker', 'scheduler', 'console'])).toBe(50);
    expect(defaultHeapGrowthPercent(['worker'])).toBe(30);
    expect(defaultHeapGrowthPercent(['worker', 'console'])).toBe(30);
    expect(defaultHeapGrowthPercent(['console'])).toBe(30);
  });

  it('holds the heap tighter while a load lasts, nested holds included, and gives the percent set back', () => {
    const flags = jest.spyOn(v8, 'setFlagsFromString');
    try {
      applyHeapGrowth(50, []);
      expect(heapGrowthNow()).toBe(50);
      flags.mockClear();
      const first = tightenHeapGrowth();
      const second = tightenHeapGrowth();
      expect(heapGrowthNow()).toBe(LOADING_HEAP_GROWTH_PERCENT);
      expect(flags.mock.calls).toEqual([[`--heap-growing-percent=${LOADING_HEAP_GROWTH_PERCENT}`]]);
      first();
      first();
      expect(heapGrowthNow()).toBe(LOADING_HEAP_GROWTH_PERCENT);
      // A percent set meanwhile waits for the load's end; one below the load's bound stands.
      applyHeapGrowth(80, []);
      expect(heapGrowthNow()).toBe(LOADING_HEAP_GROWTH_PERCENT);
      flags.mockClear();
      second();
      expect(heapGrowthNow()).toBe(80);
      expect(flags.mock.calls).toEqual([['--heap-growing-percent=80']]);
      applyHeapGrowth(10, []);
      const third = tightenHeapGrowth();
      expect(heapGrowthNow()).toBe(10);
      third();
      // Back to V8's policy after a percent was set: V8 is told so.
      flags.mockClear();
      applyHeapGrowth(0, []);
      expect(flags.mock.calls).toEqual([['--heap-growing-percent=0']]);
    } finally {
      flags.mockRestore();
      applyHeapGrowth(50, []);
    }
  });

  it('leaves a node flag and V8 own policy alone while a load lasts', () => {
    applyHeapGrowth(50, ['--heap-growing-percent=30']);
    const release = tightenHeapGrowth();
    expect(heapGrowthNow()).toBeUndefined();
    release();
    applyHeapGrowth(0, []);
    tightenHeapGrowth()();
    expect(heapGrowthNow()).toBeUndefined();
    applyHeapGrowth(50, []);
  });

  it('keeps V8 own policy at 0', () => {
    expect(applyHeapGrowth(0, [])).toEqual({ kind: 'v8-default' });
  });

  it('bounds the heap a process with promoted garbage reserves (a child process each way)', () => {
    const v8Default = churn(0);
    const bounded = churn(50);
    expect(v8Default.applied.kind).toBe('v8-default');
    expect(bounded.applied).toEqual({ kind: 'set', percent: 50 });
    // Measured: about 480-550 MB with V8's policy, 235-260 MB at 50%.
    expect(bounded.maxHeapTotalMb).toBeLessThan(0.75 * v8Default.maxHeapTotalMb);
  });
});
