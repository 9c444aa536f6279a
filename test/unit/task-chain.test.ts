import { BEHIND_MAX_WAIT_MS, TaskChain } from '../../src/leader/task-chain';
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

describe('TaskChain lanes', () => {
  /** A task that records its name and returns once `gate` opens (undefined: at once). */
  function recorder(ran: string[]) {
    return (name: string, gate?: Promise<void>) => async () => {
      ran.push(name);
      await gate;
    };
  }

  it('runs the lane behind only when the first has nothing queued, each lane in its order', async () => {
    const clock = new FakeClock(1_000);
    const chain = new TaskChain(clock, recordingLogger([]));
    const ran: string[] = [];
    const task = recorder(ran);
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    // A chunk's planning runs; the rest of its tick and two enqueues queue behind, then a tick of frequent jobs comes due.
    void chain.run(task('chunk 1', gate), 'failed');
    void chain.run(task('chunk 2'), 'failed', 'behind');
    void chain.run(task('enqueue 2'), 'failed', 'behind');
    void chain.run(task('every-second tick'), 'failed');
    await chain.at(clock.now() + 100, task('its enqueue'), 'failed');
    clock.advance(100);
    open();
    await chain.idle();
    expect(ran).toEqual(['chunk 1', 'every-second tick', 'its enqueue', 'chunk 2', 'enqueue 2']);
  });

  it('a task that waited behind for BEHIND_MAX_WAIT_MS takes turns with the first lane', async () => {
    const clock = new FakeClock(1_000);
    const chain = new TaskChain(clock, recordingLogger([]));
    const ran: string[] = [];
    // A leader that cannot keep up: every task of the first lane queues the next one.
    let left = 6;
    let finished!: () => void;
    const last = new Promise<void>((resolve) => (finished = resolve));
    const busy = (name: string) => async (): Promise<void> => {
      ran.push(name);
      clock.block(BEHIND_MAX_WAIT_MS / 2);
      if (--left > 0) void chain.run(busy(`tick ${6 - left}`), 'failed');
      else finished();
    };
    void chain.run(busy('tick 0'), 'failed');
    void chain.run(async () => void ran.push('rare 1'), 'failed', 'behind');
    void chain.run(async () => void ran.push('rare 2'), 'failed', 'behind');
    await last;
    expect(ran).toEqual(['tick 0', 'tick 1', 'rare 1', 'tick 2', 'rare 2', 'tick 3', 'tick 4', 'tick 5']);
  });

  it('starts a task in a later microtask, not inside run, and logs a failure without stopping the chain', async () => {
    const clock = new FakeClock(1_000);
    const errors: { err: unknown; message: string }[] = [];
    const chain = new TaskChain(clock, recordingLogger(errors));
    const ran: string[] = [];
    const first = chain.run(async () => {
      ran.push('first');
      throw new Error('boom');
    }, 'tick failed', 'behind');
    expect(ran).toEqual([]);
    await first;
    await chain.run(async () => void ran.push('second'), 'failed');
    expect(ran).toEqual(['first', 'second']);
    expect(errors.map((e) => e.message)).toEqual(['tick failed']);
  });

  it('idle waits for every task queued before it, in both lanes, even with the lane behind overdue', async () => {
    const clock = new FakeClock(1_000);
    const chain = new TaskChain(clock, recordingLogger([]));
    const ran: string[] = [];
    void chain.run(async () => {
      ran.push('slow');
      clock.block(BEHIND_MAX_WAIT_MS * 2);
    }, 'failed');
    void chain.run(async () => void ran.push('rare'), 'failed', 'behind');
    void chain.run(async () => void ran.push('tick'), 'failed');
    const idle = chain.idle().then(() => ran.push('idle'));
    void chain.run(async () => void ran.push('after'), 'failed');
    await idle;
    // The overdue task behind went before the tick; idle came after all three.
    expect(ran.slice(0, 3)).toEqual(['slow', 'rare', 'tick']);
    expect(ran.indexOf('idle')).toBeGreaterThan(2);
    await chain.close();
    expect(ran).toContain('after');
  });

  it('at, not inline: a task whose time has passed is queued in its lane, behind what is there', async () => {
    const clock = new FakeClock(1_000);
    const chain = new TaskChain(clock, recordingLogger([]));
    const ran: string[] = [];
    void chain.run(async () => void ran.push('queued behind'), 'failed', 'behind');
    await chain.at(clock.now() - 1, async () => void ran.push('late enqueue'), 'failed', 'behind', false);
    expect(ran).not.toContain('late enqueue');
    await chain.idle();
    expect(ran).toEqual(['queued behind', 'late enqueue']);
  });
});
