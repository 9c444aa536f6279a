/**
 * The library's answer errors and the ZkErrors of ordinary outcomes carry no stack trace (capturing
 * it was a fifth of a takeover's CPU); everything else about them stays as it was.
 */
import { installStacklessExceptions, withoutStack } from '../../src/shared/zk/driver/stackless-exceptions';
import { toZkError } from '../../src/shared/zk/zk-errors';
import { ErrorCodes } from '../../src/shared/errors';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Exception = require('node-zookeeper-client/lib/Exception.js') as { create(code: number, path?: string): Error & { getCode(): number; path?: string } };

const frames = (err: Error): number => (err.stack ?? '').split('\n').filter((line) => line.trim().startsWith('at ')).length;

describe('stackless ZooKeeper errors', () => {
  it('the library builds its answer errors without a stack, with their code, name and message', () => {
    expect(installStacklessExceptions()).toBe(true);
    expect(installStacklessExceptions()).toBe(true);
    const err = Exception.create(-101, '/job/leader/sharding/necessary');
    expect(err).toBeInstanceOf(Error);
    expect(err.getCode()).toBe(-101);
    expect(err.name).toBe('NO_NODE');
    expect(err.message).toBe('Exception: NO_NODE[-101]@/job/leader/sharding/necessary');
    expect(frames(err)).toBe(0);
    expect(Error.stackTraceLimit).toBeGreaterThan(0);
    expect(frames(new Error('ours'))).toBeGreaterThan(0);
  });

  it('ordinary outcomes become stackless ZkErrors; other failures keep their stack', () => {
    const missing = toZkError(Exception.create(-101), 'get', '/a');
    expect(missing.code).toBe(ErrorCodes.ZK_NO_NODE);
    expect(missing.message).toBe('ZooKeeper get /a failed: NO_NODE (-101)');
    expect(frames(missing)).toBe(0);
    for (const code of [-110, -103, -111]) expect(frames(toZkError(Exception.create(code), 'op', '/a'))).toBe(0);
    const lost = toZkError(Exception.create(-4), 'get', '/a');
    expect(lost.code).toBe(ErrorCodes.ZK_CONNECTION_LOSS);
    expect(frames(lost)).toBeGreaterThan(0);
  });

  it('withoutStack gives the limit back, also when what it runs throws', () => {
    const limit = Error.stackTraceLimit;
    expect(() => withoutStack(() => {
      throw new Error('inside');
    })).toThrow('inside');
    expect(Error.stackTraceLimit).toBe(limit);
    expect(withoutStack(() => 42)).toBe(42);
  });
});
