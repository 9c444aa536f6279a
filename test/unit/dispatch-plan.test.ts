import { BIG_ENQUEUE, BUSY_DELIVERY_LEAD_MS, BUSY_FOR_MS, DELIVERY_LEAD_MS, DispatchLead, MAX_DISPATCH_LEAD_MS } from '../../src/leader/dispatch-lead';
import { fireRequests, reroute, type InstanceNow } from '../../src/leader/dispatch-plan';
import { ErrorCodes } from '../../src/shared/errors';
import type { ExecutionRequest } from '../../src/shared/registry/execution-request';

const base = { job: 'j', fireTime: 5_000, source: 'NORMAL' as const, epoch: 3, catchUp: false };
const queueOf = (id: string) => `q-${id}`;

describe('fireRequests', () => {
  it('makes one request per enabled item, grouped per instance queue, and the ledger parts', () => {
    const out = fireRequests({ ...base, assignment: { a: [0, 1], b: [2, 3] }, queueOf, itemDisabled: (item) => item === 1 });
    expect([...out.requests]).toEqual([
      ['q-a', [{ job: 'j', item: 0, fireTime: 5_000, source: 'NORMAL', epoch: 3 }]],
      ['q-b', [{ job: 'j', item: 2, fireTime: 5_000, source: 'NORMAL', epoch: 3 }, { job: 'j', item: 3, fireTime: 5_000, source: 'NORMAL', epoch: 3 }]],
    ]);
    expect(out.dispatched).toEqual({ a: [0], b: [2, 3] });
    expect(out.queues).toEqual({ a: 'q-a', b: 'q-b' });
  });

  it('leaves out an instance whose items are all disabled, and flags catch-up fires', () => {
    const out = fireRequests({ ...base, catchUp: true, assignment: { a: [0], b: [1] }, queueOf, itemDisabled: (item) => item === 0 });
    expect(out.dispatched).toEqual({ b: [1] });
    expect(out.queues).toEqual({ b: 'q-b' });
    expect(out.requests.get('q-b')).toEqual([{ job: 'j', item: 1, fireTime: 5_000, source: 'NORMAL', epoch: 3, catchUp: true }]);
  });
});

describe('reroute', () => {
  const request = (item: number): ExecutionRequest => ({ job: 'j', item, fireTime: 5_000, source: 'NORMAL', epoch: 3 });

  function plan(): Map<string, ExecutionRequest[]> {
    return new Map([
      ['q-a', [request(0), request(1)]],
      ['q-b', [request(2)]],
      ['q-c', [request(3)]],
    ]);
  }
  const planned = { a: 'q-a', b: 'q-b', c: 'q-c' };
  // Each item to the instance its next fires go to: here 0 -> c, 1 -> b, 2 -> a.
  const owners: Record<number, string> = { 0: 'c', 1: 'b', 2: 'a', 3: 'a' };
  const targets = (items: number[], except: string) => new Map(items.filter(() => except !== 'nobody').map((item) => [item, { queue: queueOf(owners[item]) }]));

  it('moves the requests of a lost or draining instance, and of one on a new queue, each to its target', () => {
    const now: Record<string, InstanceNow> = { a: undefined, b: { queue: 'q-b', state: 'draining' }, c: { queue: 'q-c2', state: 'ready' } };
    const requests = plan();
    const moved = reroute(requests, planned, (id) => now[id], targets);
    expect(moved).toEqual([
      { from: 'a', items: [0, 1] },
      { from: 'b', items: [2] },
      { from: 'c', items: [3] },
    ]);
    expect([...requests].map(([q, list]) => [q, list.map((r) => r.item)]).sort()).toEqual([
      ['q-a', [2, 3]],
      ['q-b', [1]],
      ['q-c', [0]],
    ]);
  });

  it('leaves the plan alone when every instance is ready on its queue', () => {
    const requests = plan();
    expect(reroute(requests, planned, (id) => ({ queue: `q-${id}`, state: 'ready' }), targets)).toEqual([]);
    expect([...requests.keys()]).toEqual(['q-a', 'q-b', 'q-c']);
  });

  it('keeps the requests of an instance whose items have nowhere to go', () => {
    const requests = new Map([['q-x', [request(0)]]]);
    expect(reroute(requests, { nobody: 'q-x' }, () => undefined, targets)).toEqual([]);
    expect([...requests.keys()]).toEqual(['q-x']);
  });
});

describe('DispatchLead', () => {
  it('enqueues at most 300 ms ahead, and follows twice the slowest recent preparation within its bounds', () => {
    const lead = new DispatchLead(100);
    expect([lead.ms, lead.deliveryMs]).toEqual([100, 100]);
    expect(lead.adapt(30)).toBeUndefined();
    expect(lead.adapt(200)).toBe(100);
    expect([lead.ms, lead.deliveryMs]).toEqual([400, 300]);
    expect(lead.adapt(5_000)).toBe(400);
    expect(lead.ms).toBe(MAX_DISPATCH_LEAD_MS);
    // The slow one leaves the window of the last 8 preparations.
    for (let i = 0; i < 7; i += 1) lead.adapt(10);
    expect(lead.ms).toBe(MAX_DISPATCH_LEAD_MS);
    expect(lead.adapt(10)).toBe(MAX_DISPATCH_LEAD_MS);
    expect(lead.ms).toBe(100);
  });

  it('enqueues a big fire as early as its enqueue is expected to take, within the lead', () => {
    const lead = new DispatchLead();
    // Nothing measured yet, or a fire of a few requests: the usual 300 ms.
    expect(lead.deliveryFor(20_000)).toBe(DELIVERY_LEAD_MS);
    // A small enqueue says nothing about the pace.
    expect(lead.noteEnqueue(BIG_ENQUEUE - 1, 5_000)).toBeUndefined();
    expect(lead.deliveryFor(20_000)).toBe(DELIVERY_LEAD_MS);
    // 20,000 requests in 1.5 s: the lead grows to its bound, a fire of 20,000 begins 800 ms ahead
    // (as much of its enqueue as the lead allows), one of 5,000 (375 ms at that pace) 375 ms
    // ahead, one of 100 still 300 ms.
    expect(lead.noteEnqueue(20_000, 1_500)).toBe(DELIVERY_LEAD_MS);
    expect(lead.ms).toBe(MAX_DISPATCH_LEAD_MS);
    expect([lead.deliveryFor(20_000), lead.deliveryFor(5_000), lead.deliveryFor(100)]).toEqual([MAX_DISPATCH_LEAD_MS, 375, DELIVERY_LEAD_MS]);
    expect(lead.deliveryMs).toBe(DELIVERY_LEAD_MS);
    // The slowest pace of the recent big enqueues counts: a faster one does not lower it.
    lead.noteEnqueue(4_000, 100);
    expect(lead.deliveryFor(5_000)).toBe(375);
    // Once the slow enqueue's duration has left the window of the last 8, the lead comes back
    // down, and with it every delivery.
    for (let i = 0; i < 8; i += 1) lead.adapt(10);
    expect(lead.ms).toBe(DELIVERY_LEAD_MS);
    expect(lead.deliveryFor(20_000)).toBe(DELIVERY_LEAD_MS);
    // Its pace leaves with the next 8 big enqueues: at 0.01 ms a request, with the lead at 800 ms
    // again, 20,000 requests take 200 ms (300 ms ahead, the least) and 60,000 take 600 ms.
    for (let i = 0; i < 8; i += 1) lead.noteEnqueue(4_000, 40);
    lead.adapt(400);
    expect(lead.ms).toBe(MAX_DISPATCH_LEAD_MS);
    expect([lead.deliveryFor(20_000), lead.deliveryFor(60_000)]).toEqual([DELIVERY_LEAD_MS, 600]);
  });

  it('plans and enqueues every fire 700 ms ahead for ten minutes after a burst of rarer jobs, by the clock', () => {
    let now = 1_000_000;
    const lead = new DispatchLead(undefined, () => now);
    expect(lead.noteBurst()).toBe(DELIVERY_LEAD_MS);
    expect([lead.ms, lead.deliveryMs, lead.deliveryFor(100)]).toEqual([BUSY_DELIVERY_LEAD_MS, BUSY_DELIVERY_LEAD_MS, BUSY_DELIVERY_LEAD_MS]);
    // Slow preparations still raise it to the bound; it comes back to the busy least, not below.
    lead.adapt(600);
    expect([lead.ms, lead.deliveryMs]).toEqual([MAX_DISPATCH_LEAD_MS, BUSY_DELIVERY_LEAD_MS]);
    for (let i = 0; i < 8; i += 1) lead.adapt(10);
    expect(lead.ms).toBe(BUSY_DELIVERY_LEAD_MS);
    // However many ticks there were (or few): ten minutes after the burst, 300 ms again, the
    // delivery at once and the lead at the next tick.
    now += BUSY_FOR_MS - 1;
    expect(lead.adapt(10)).toBeUndefined();
    expect(lead.deliveryMs).toBe(BUSY_DELIVERY_LEAD_MS);
    now += 1;
    expect(lead.deliveryMs).toBe(DELIVERY_LEAD_MS);
    expect(lead.adapt(10)).toBe(BUSY_DELIVERY_LEAD_MS);
    expect([lead.ms, lead.deliveryMs]).toEqual([DELIVERY_LEAD_MS, DELIVERY_LEAD_MS]);
    // A later burst starts the ten minutes again.
    now += 60_000;
    lead.noteBurst();
    now += BUSY_FOR_MS - 1;
    expect(lead.deliveryMs).toBe(BUSY_DELIVERY_LEAD_MS);
    // A configured lead above it stays; a lead of 0 is raised only while bursts come.
    const long = new DispatchLead(MAX_DISPATCH_LEAD_MS, () => now);
    expect(long.noteBurst()).toBeUndefined();
    expect([long.ms, long.deliveryMs]).toEqual([MAX_DISPATCH_LEAD_MS, BUSY_DELIVERY_LEAD_MS]);
    const none = new DispatchLead(0, () => now);
    none.noteBurst();
    expect(none.deliveryMs).toBe(BUSY_DELIVERY_LEAD_MS);
    now += BUSY_FOR_MS;
    none.adapt(0);
    expect([none.ms, none.deliveryMs]).toEqual([0, 0]);
  });

  it('refuses a lead outside 0-800 ms, naming it', () => {
    expect(() => new DispatchLead(801)).toThrow(expect.objectContaining({ code: ErrorCodes.INVALID_CONFIG, message: expect.stringContaining('dispatchLeadMs') }));
    expect(() => new DispatchLead(1.5)).toThrow(/dispatchLeadMs/);
  });
});
