import { TaskChain } from '../../src/leader/task-chain';
import type { Logger } from '../../src/shared/logger';
import { FakeClock } from '../helpers/fake-clock';

function recordingLogger(errors: { err: unknown; message: string }[]): Logger {
  return { error: (obj: { err: unknown }, message: string) => errors.push({ err: obj.err, message }) } as unknown as Logger;
}

describe('TaskChain.at', () => {
  it('runs a task whose time has passed at once, inline, and logs its failure instead of throwing it', async () => {
    const clock = new FakeClock(1_000);
    const errors: { err: unknown; message: string }[] = [];
    const chain = new TaskChain(clock, recordingLogger(errors));
    const ran: string[] = [];
    const boom = new Error('addBulk failed');
    // A tick's fire times, each released in turn: the first one's failure leaves the second alone.
    await chain.at(clock.now() - 1, async () => {
      ran.push('first');
      throw boom;
    }, 'deferred enqueue failed');
    await chain.at(clock.now(), async () => {
      ran.push('second');
    }, 'deferred enqueue failed');
    expect(ran).toEqual(['first', 'second']);
    expect(errors).toEqual([{ err: boom, message: 'deferred enqueue failed' }]);
    expect(chain.waiting).toBe(0);
  });

  it('defers a task due later off the chain, runs it on the chain when due, and logs its failure', async () => {
    const clock = new FakeClock(1_000);
    const errors: { err: unknown; message: string }[] = [];
    const chain = new TaskChain(clock, recordingLogger(errors));
    const ran: string[] = [];
    await chain.at(clock.now() + 500, async () => {
      ran.push('due');
      throw new Error('later failure');
    }, 'deferred enqueue failed');
    expect([ran, chain.waiting]).toEqual([[], 1]);
    // The chain is free meanwhile: a task run now goes first.
    await chain.run(async () => void ran.push('meanwhile'), 'failed');
    clock.advance(500);
    await chain.idle();
    expect(ran).toEqual(['meanwhile', 'due']);
    expect(chain.waiting).toBe(0);
    expect(errors.map((e) => e.message)).toEqual(['deferred enqueue failed']);
  });
});
