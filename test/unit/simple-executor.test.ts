import type { ShardingContext } from '../../src/shared/config/job-definition';
import { simpleExecutor } from '../../src/worker/executors/simple-executor';
import { noResharding, testContext } from '../helpers/sharding-context';

describe('simpleExecutor', () => {
  it('runs execute with the context and reports nothing', async () => {
    const seen: ShardingContext[] = [];
    const ctx = testContext();
    await expect(simpleExecutor.run({ execute: (c) => void seen.push(c) }, ctx, noResharding)).resolves.toBeUndefined();
    expect(seen).toEqual([ctx]);
  });

  it('rejects with what execute threw, unchanged, for the error handler', async () => {
    const boom = new TypeError('bad row');
    await expect(simpleExecutor.run({ execute: async () => { throw boom; } }, testContext(), noResharding)).rejects.toBe(boom);
  });
});
