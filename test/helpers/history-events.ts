import type { HistoryWriterEvents } from '../../src/history/history-events';
import type { TypedEmitter } from '../../src/shared/typed-emitter';

const NAMES = ['history:flushed', 'history:unavailable', 'history:recovered', 'history:dropped'] as const;
type Name = (typeof NAMES)[number];

/** What a history writer reported, in order (`history:flushed` left out unless asked for). */
export interface RecordedHistoryEvents {
  /** Event names in order. */
  names(): Name[];
  /** Payloads of one event, in order. */
  of<K extends Name>(name: K): HistoryWriterEvents[K][];
  /** Sum of `count` over every `history:dropped`. */
  droppedCount(): number;
  clear(): void;
}

/** Records the events `writer` emits from now on. */
export function recordHistoryEvents(writer: TypedEmitter<HistoryWriterEvents>, options: { flushed?: boolean } = {}): RecordedHistoryEvents {
  const events: { name: Name; payload: object }[] = [];
  for (const name of NAMES) {
    if (name !== 'history:flushed' || options.flushed) writer.on(name, (payload: object) => events.push({ name, payload }));
  }
  const of = <K extends Name>(name: K) => events.filter((e) => e.name === name).map((e) => e.payload as HistoryWriterEvents[K]);
  return {
    names: () => events.map((e) => e.name),
    of,
    droppedCount: () => of('history:dropped').reduce((sum, e) => sum + e.count, 0),
    clear: () => void events.splice(0),
  };
}
