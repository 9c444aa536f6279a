/**
 * Batching decisions of the history writers, with an in-memory store behind the shared BatchWriter
 * and fake timers: when a batch goes out, what an outage keeps, drops and reports, what close() does.
 */
import { BatchWriter, type BatchingOptions, type SendOutcome } from '../../src/history/batch-writer';
import { silentLogger } from '../../src/shared/logger';
import type { ExecutionRecord } from '../../src/shared/registry/execution-record';
import { executionRecord } from '../helpers/execution-records';
import { recordHistoryEvents } from '../helpers/history-events';

const BATCHING: BatchingOptions = {
  maxBuffered: 100, batchSize: 10, flushIntervalMs: 200, retryBaseMs: 100, retryMaxMs: 1_000, closeTimeoutMs: 2_000,
};

/** A store in memory: `batches` is what each write carried; `down` makes writes fail. */
class MemoryWriter extends BatchWriter<number> {
  readonly batches: number[][] = [];
  down = false;
  /** Entries the store takes for now and refuses for good, per write. */
  refuse: (batch: readonly number[]) => SendOutcome<number> = () => ({});

  constructor(options: Partial<BatchingOptions> = {}) {
    super('postgres', { ...BATCHING, ...options }, silentLogger);
  }

  add(...entries: number[]): void {
    entries.forEach((entry) => this.enqueue(entry));
  }

  record(record: ExecutionRecord): void {
    const valid = this.validRecord(record);
    if (valid) this.enqueue(valid.item);
  }

  get stored(): number[] {
    return this.batches.flat();
  }

  protected override async send(batch: readonly number[]): Promise<SendOutcome<number>> {
    if (this.down) throw new Error('store down');
    const outcome = this.refuse(batch);
    const skip = new Set(outcome.retry ?? []);
    this.batches.push(batch.filter((n) => !skip.has(n)).slice(outcome.rejected ?? 0));
    return outcome;
  }
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

beforeEach(() => jest.useFakeTimers({ now: new Date('2026-01-02T03:04:05Z') }));
afterEach(() => jest.useRealTimers());

describe('BatchWriter batching', () => {
  it('gathers what arrives within the flush interval into one write, and writes nothing before', async () => {
    const writer = new MemoryWriter();
    writer.add(1, 2, 3);
    await jest.advanceTimersByTimeAsync(150);
    writer.add(4);
    expect(writer.batches).toEqual([]);
    await jest.advanceTimersByTimeAsync(50);
    expect(writer.batches).toEqual([[1, 2, 3, 4]]);
    expect(writer.stats()).toMatchObject({ buffered: 0, written: 4, dropped: 0 });
    await writer.close();
  });

  it('writes a full batch at once, without waiting for the timer, and the remainder on the timer', async () => {
    const writer = new MemoryWriter();
    writer.add(...range(1, 25));
    await jest.advanceTimersByTimeAsync(0);
    expect(writer.batches).toEqual([range(1, 10), range(11, 20)]);
    await jest.advanceTimersByTimeAsync(200);
    expect(writer.batches).toEqual([range(1, 10), range(11, 20), range(21, 25)]);
    await writer.close();
  });

  it('keeps one write in flight: entries arriving meanwhile go in the next write', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const writer = new (class extends MemoryWriter {
      protected override async send(batch: readonly number[]) {
        if (this.batches.length === 0) await gate;
        return super.send(batch);
      }
    })();
    writer.add(1, 2);
    await jest.advanceTimersByTimeAsync(200);
    writer.add(3);
    await jest.advanceTimersByTimeAsync(1_000);
    expect(writer.batches).toEqual([]);
    expect(writer.stats().buffered).toBe(3);
    release();
    await jest.advanceTimersByTimeAsync(200);
    expect(writer.batches).toEqual([[1, 2], [3]]);
    await writer.close();
  });
});

describe('BatchWriter outages', () => {
  it('keeps every entry through an outage and writes them in order once the store is back, reporting the gap', async () => {
    const writer = new MemoryWriter();
    const events = recordHistoryEvents(writer);
    writer.down = true;
    writer.add(...range(1, 5));
    await jest.advanceTimersByTimeAsync(200);
    writer.add(...range(6, 30));
    await jest.advanceTimersByTimeAsync(5_000);
    expect(writer.stored).toEqual([]);
    expect(writer.stats()).toMatchObject({ buffered: 30, dropped: 0, unavailableSince: Date.parse('2026-01-02T03:04:05.200Z') });
    expect(events.of('history:unavailable')).toEqual([expect.objectContaining({ store: 'postgres', buffered: 5 })]);
    writer.down = false;
    await jest.advanceTimersByTimeAsync(1_000);
    expect(writer.stored).toEqual(range(1, 30));
    expect(writer.stats()).toMatchObject({ buffered: 0, written: 30, dropped: 0, unavailableSince: null });
    const [recovered] = events.of('history:recovered');
    expect(recovered).toMatchObject({ store: 'postgres', maxBuffered: 30, dropped: 0 });
    expect(recovered.outageMs).toBeGreaterThanOrEqual(5_000);
    expect(events.names()).toEqual(['history:unavailable', 'history:recovered']);
    await writer.close();
  });

  it('drops the oldest entries beyond the buffer, counts and reports them, and writes the newest', async () => {
    const writer = new MemoryWriter({ maxBuffered: 20, batchSize: 5 });
    const events = recordHistoryEvents(writer);
    writer.down = true;
    writer.add(...range(1, 3));
    await jest.advanceTimersByTimeAsync(200);
    writer.add(...range(4, 50));
    await jest.advanceTimersByTimeAsync(3_000);
    expect(writer.stats()).toMatchObject({ buffered: 20, dropped: 30, droppedBy: { overflow: 30 } });
    expect(events.droppedCount()).toBe(30);
    expect(events.of('history:dropped').at(-1)).toMatchObject({ reason: 'overflow', total: 30 });
    writer.down = false;
    await jest.advanceTimersByTimeAsync(1_000);
    expect(writer.stored).toEqual(range(31, 50));
    expect(events.of('history:recovered')).toEqual([expect.objectContaining({ dropped: 30, maxBuffered: 20 })]);
    await writer.close();
  });

  it('backs off between failed writes instead of retrying on every new entry', async () => {
    const writer = new MemoryWriter({ retryBaseMs: 500, retryMaxMs: 500 });
    writer.down = true;
    writer.add(1);
    await jest.advanceTimersByTimeAsync(200);
    for (let i = 0; i < 20; i++) writer.add(100 + i);
    await jest.advanceTimersByTimeAsync(400);
    expect(writer.stats().failedFlushes).toBe(1);
    await jest.advanceTimersByTimeAsync(2_000);
    // Base and cap 500 ms: attempts at 200, 700, 1200, 1700 and 2200 ms, however many entries arrive.
    expect(writer.stats().failedFlushes).toBe(5);
    writer.down = false;
    await writer.close();
    expect(writer.stored).toHaveLength(21);
  });

  it('retries only the entries the store refused for now, and counts those it refused for good', async () => {
    const writer = new MemoryWriter();
    let first = true;
    writer.refuse = (batch) => {
      if (!first) return {};
      first = false;
      return { retry: batch.filter((n) => n % 2 === 0), rejected: 1 };
    };
    writer.add(1, 2, 3, 4, 5);
    await jest.advanceTimersByTimeAsync(2_000);
    expect(writer.batches).toEqual([[3, 5], [2, 4]]);
    expect(writer.stats()).toMatchObject({ written: 4, dropped: 1, droppedBy: { rejected: 1 } });
    await writer.close();
  });
});

describe('BatchWriter close and bad input', () => {
  it('close() writes what is buffered without waiting for the timer', async () => {
    const writer = new MemoryWriter();
    writer.add(1, 2, 3);
    await writer.close();
    expect(writer.batches).toEqual([[1, 2, 3]]);
  });

  it('close() gives up at its deadline while the store is down and reports the rest as dropped', async () => {
    const writer = new MemoryWriter({ closeTimeoutMs: 1_000 });
    const events = recordHistoryEvents(writer);
    writer.down = true;
    writer.add(1, 2, 3);
    const closed = writer.close();
    await jest.advanceTimersByTimeAsync(1_000);
    await closed;
    expect(writer.stats()).toMatchObject({ buffered: 0, written: 0, dropped: 3, droppedBy: { closed: 3 } });
    expect(events.of('history:dropped')).toEqual([expect.objectContaining({ reason: 'closed', count: 3 })]);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('close() is idempotent, and an entry appended after it is dropped and counted, not thrown', async () => {
    const writer = new MemoryWriter();
    const first = writer.close();
    expect(writer.close()).toBe(first);
    await first;
    expect(() => writer.add(1)).not.toThrow();
    expect(writer.stats().droppedBy.closed).toBe(1);
  });

  it('drops an invalid record, counted as invalid, and goes on with the valid ones', async () => {
    const writer = new MemoryWriter();
    writer.record(executionRecord({ item: 7 }));
    writer.record({ ...executionRecord(), item: -1 });
    writer.record({ job: 'billing' } as ExecutionRecord);
    await writer.close();
    expect(writer.stored).toEqual([7]);
    expect(writer.stats()).toMatchObject({ written: 1, dropped: 2, droppedBy: { invalid: 2 } });
  });
});
