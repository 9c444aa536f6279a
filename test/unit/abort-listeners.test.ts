import { getEventListeners } from 'node:events';
import { onAbort } from '../../src/shared/abort-listeners';

describe('onAbort', () => {
  it('calls every callback once on abort, through one listener on the signal', () => {
    const controller = new AbortController();
    const calls: number[] = [];
    for (let i = 0; i < 1_000; i += 1) onAbort(controller.signal, () => calls.push(i));
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    controller.abort();
    controller.abort();
    expect(calls).toHaveLength(1_000);
    expect(new Set(calls).size).toBe(1_000);
  });

  it('does not call a removed callback, and removes only that registration of a function given twice', () => {
    const controller = new AbortController();
    const calls: string[] = [];
    const twice = () => calls.push('twice');
    const stopFirst = onAbort(controller.signal, twice);
    onAbort(controller.signal, twice);
    const stopOther = onAbort(controller.signal, () => calls.push('other'));
    stopFirst();
    stopOther();
    stopOther();
    controller.abort();
    expect(calls).toEqual(['twice']);
  });

  it('calls back in a microtask for a signal aborted already, unless removed first', async () => {
    const calls: string[] = [];
    const signal = AbortSignal.abort();
    onAbort(signal, () => calls.push('called'));
    onAbort(signal, () => calls.push('removed'))();
    expect(calls).toEqual([]);
    await Promise.resolve();
    expect(calls).toEqual(['called']);
  });

  it('listens again on a signal after its callbacks were all removed', () => {
    const controller = new AbortController();
    onAbort(controller.signal, () => undefined)();
    const calls: number[] = [];
    onAbort(controller.signal, () => calls.push(1));
    controller.abort();
    expect(calls).toEqual([1]);
  });
});
