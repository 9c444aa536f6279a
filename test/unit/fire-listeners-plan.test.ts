/**
 * The pure parts of once-per-fire listeners: what the leader puts on each request of a fire
 * (`fireItems`), and where a fire's state lives in Redis.
 */
import { dispatchedItems, fireRequests, withFireItems } from '../../src/leader/dispatch-plan';
import { defineJob } from '../../src/shared/config/job-definition';
import { ErrorCodes } from '../../src/shared/errors';
import { executionJobId, executionRequestSchema, type ExecutionRequest } from '../../src/shared/registry/execution-request';
import { fireStateKeys } from '../../src/shared/registry/redis-keys';

const base = { job: 'j', fireTime: 5_000, source: 'NORMAL' as const, epoch: 3, catchUp: false };
const queueOf = (id: string) => `q-${id}`;

describe('fireItems on the requests of a fire', () => {
  it('tells every request how many items its fire dispatched (disabled items left out) when the job has fire listeners', () => {
    const out = fireRequests({ ...base, fireListeners: true, assignment: { a: [0, 1], b: [2, 3] }, queueOf, itemDisabled: (item) => item === 1 });
    const all = [...out.requests.values()].flat();
    expect(all.map((r) => [r.item, r.fireItems])).toEqual([[0, 3], [2, 3], [3, 3]]);
    expect(all.every((r) => executionRequestSchema.safeParse(r).success)).toBe(true);
  });

  it('adds nothing for jobs without fire listeners, nor to a catch-up flag', () => {
    const out = fireRequests({ ...base, catchUp: true, assignment: { a: [0], b: [1] }, queueOf, itemDisabled: () => false });
    for (const r of [...out.requests.values()].flat()) expect(r).not.toHaveProperty('fireItems');
    const flagged = fireRequests({ ...base, catchUp: true, fireListeners: true, assignment: { a: [0], b: [1] }, queueOf, itemDisabled: () => false });
    expect(flagged.requests.get('q-b')).toEqual([{ job: 'j', item: 1, fireTime: 5_000, source: 'NORMAL', epoch: 3, catchUp: true, fireItems: 2 }]);
  });

  it('counts a ledger\'s items, and adds the count only when there are listeners and items', () => {
    expect(dispatchedItems({ a: [0, 1, 2], b: [], c: [5] })).toBe(4);
    const request = { job: 'j', item: 0, fireTime: 1, source: 'TRIGGER' as const, epoch: 1 };
    expect(withFireItems(request, true, 4)).toEqual({ ...request, fireItems: 4 });
    expect(withFireItems(request, undefined, 4)).toBe(request);
    expect(withFireItems(request, true, 0)).toBe(request);
  });

  it('keeps the BullMQ job id of a request whatever it carries', () => {
    const request: ExecutionRequest = { job: 'j', item: 2, fireTime: 7, source: 'FAILOVER', epoch: 1, from: 'w2' };
    const flagged: ExecutionRequest = { ...request, fireItems: 9, givenUp: true };
    expect(executionJobId(flagged)).toBe(executionJobId(request));
  });

  it('refuses a malformed count or given-up flag, naming the field', () => {
    const bad = executionRequestSchema.safeParse({ job: 'j', item: 0, fireTime: 1, source: 'NORMAL', epoch: 1, fireItems: 0, givenUp: 'yes' });
    expect(bad.success).toBe(false);
    expect(bad.error!.issues.map((i) => i.path.join('.')).sort()).toEqual(['fireItems', 'givenUp']);
  });
});

describe('the stored config announces fire listeners', () => {
  it('sets fireListeners for a job with beforeFire or afterFire, not for one with only execution listeners', () => {
    const execute = () => undefined;
    expect(defineJob({ name: 'a', execute, listeners: { afterFire: () => undefined } }).config.fireListeners).toBe(true);
    expect(defineJob({ name: 'b', execute, listeners: { beforeFire: () => undefined } }).config.fireListeners).toBe(true);
    expect(defineJob({ name: 'c', execute, listeners: { beforeExecute: () => undefined } }).config).not.toHaveProperty('fireListeners');
  });
});

describe('fireStateKeys', () => {
  it('puts every key of a fire under the namespace prefix, in its hash slot', () => {
    expect(fireStateKeys('prod', 'billing', 1_700_000_000_000)).toEqual({
      state: 'shardcron:{prod}:fire:billing:1700000000000',
      ended: 'shardcron:{prod}:fire-ended:billing:1700000000000',
      lease: 'shardcron:{prod}:fire-lease:billing:1700000000000',
    });
  });

  it('refuses an invalid job name, naming the field', () => {
    expect(() => fireStateKeys('prod', 'bad name', 1)).toThrow(expect.objectContaining({ code: ErrorCodes.INVALID_CONFIG }));
  });
});
