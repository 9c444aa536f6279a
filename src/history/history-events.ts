/**
 * What the history writers report: typed events (for logs, metrics and tests) and a stats snapshot.
 * Both writers (the Redis recent list, the PostgreSQL traces) report the same way, told apart by
 * `store`.
 */
import type { ExecutionRecord } from '../shared/registry/execution-record';

/** Where a writer keeps records. */
export type HistoryStore = 'redis' | 'postgres';

/**
 * Why records were lost: `overflow` (the buffer was full while the store was slow or down; the
 * oldest went), `rejected` (the store refused them for good, e.g. a Redis key of another type),
 * `invalid` (not an ExecutionRecord), `closed` (still buffered or unconfirmed when close() gave up,
 * or appended after close()).
 */
export type DropReason = 'overflow' | 'rejected' | 'invalid' | 'closed';

/** Events of a history writer. */
export interface HistoryWriterEvents {
  [event: string]: object;
  /** A batch was written. */
  'history:flushed': { store: HistoryStore; records: number; durationMs: number }
  /** A flush failed after the last one succeeded (the start of an outage); records are kept and retried. */
  'history:unavailable': { store: HistoryStore; error: Error; buffered: number }
  /** The first flush that succeeded after an outage: how long it lasted, the most records buffered, what it cost. */
  'history:recovered': { store: HistoryStore; outageMs: number; maxBuffered: number; dropped: number }
  /** Records were lost (reported at most once per flush attempt, summed): `count` now, `total` since start. */
  'history:dropped': { store: HistoryStore; reason: DropReason; count: number; total: number }
}

/** Events of a history reader. */
export interface HistoryReaderEvents {
  [event: string]: object;
  /** A stored entry that is not a valid record was skipped. */
  'history:corrupt': { store: HistoryStore; job: string; where: string; problem: string }
}

/** A snapshot of a writer's counters since it was created. */
export interface HistoryWriterStats {
  store: HistoryStore;
  /** Records waiting, including a batch in flight. */
  buffered: number;
  /** Records the store confirmed. */
  written: number;
  /** Records lost, all reasons. */
  dropped: number;
  droppedBy: Readonly<Record<DropReason, number>>;
  /** Flush attempts that failed. */
  failedFlushes: number;
  /** Start of the current outage (epoch ms), null while the store answers. */
  unavailableSince: number | null;
}

/** What the item runner calls once per execution; never awaited, never throws. */
export interface ExecutionHistoryWriter {
  append(record: ExecutionRecord): void;
  stats(): HistoryWriterStats;
  close(): Promise<void>;
}
