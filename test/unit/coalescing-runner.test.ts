import { CoalescingRunner } from '../../src/shared/coalescing-runner';
import { deferred } from '../helpers/deferred';

describe('CoalescingRunner', () => {
  it('runs one at a time and folds every request made during a run into one more run', async () => {
    const gates = [deferred(), deferred()];
    let runs = 0;
    let active = 0;
    let maxActive = 0;
    const runner = new CoalescingRunner(async () => {
      active += 1;
      maxActive = Math.max(maxActive, active);
      await gates[runs++]?.promise;
      active -= 1;
    }, () => undefined);
    const first = runner.request();
    void runner.request();
    void runner.request();
    void runner.request();
    gates[0].resolve();
    gates[1].resolve();
    await first;
    await runner.settled();
    expect(runs).toBe(2);
    expect(maxActive).toBe(1);
  });

  it('reports a failed run and keeps serving requests', async () => {
    const errors: unknown[] = [];
    let calls = 0;
    const runner = new CoalescingRunner(async () => {
      calls += 1;
      if (calls === 1) throw new Error('boom');
    }, (e) => errors.push(e));
    await runner.request();
    await runner.request();
    expect(calls).toBe(2);
    expect(errors).toHaveLength(1);
  });

  it('again() from inside the task schedules one more run; stop() ends the loop', async () => {
    let calls = 0;
    const runner = new CoalescingRunner(async () => {
      calls += 1;
      if (calls < 3) runner.again();
    }, () => undefined);
    await runner.request();
    expect(calls).toBe(3);
    await runner.stop();
    await runner.request();
    expect(calls).toBe(3);
  });
});
