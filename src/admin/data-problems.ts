import { ErrorCodes, ShardcronError, type ErrorCode } from '../shared/errors';

/** A node whose data could not be read as its schema says (written by hand, by another tool or version). */
export interface DataProblem {
  /** The node's path, relative to the namespace root (`/billing/config`). */
  path: string;
  /** `SHARDCRON_CORRUPT_DATA` for data that fails its schema. */
  code: ErrorCode;
  /** What is wrong, naming the path and every bad field. */
  message: string;
}

/**
 * The undecodable nodes a read model currently sees, by path: reported to the reader instead of
 * crashing it or hiding the node. A node drops out as soon as it is read valid again or vanishes.
 */
export class DataProblems {
  private readonly byPath = new Map<string, DataProblem>();

  report(path: string, error: unknown): void {
    const code = error instanceof ShardcronError ? error.code : ErrorCodes.CORRUPT_DATA;
    const message = error instanceof Error ? error.message : String(error);
    this.byPath.set(path, { path, code, message });
  }

  clear(path: string): void {
    this.byPath.delete(path);
  }

  /** Forgets every problem at `prefix` or below it (a job that was removed). */
  clearUnder(prefix: string): void {
    for (const path of this.byPath.keys()) if (path === prefix || path.startsWith(`${prefix}/`)) this.byPath.delete(path);
  }

  get(path: string): DataProblem | undefined {
    return this.byPath.get(path);
  }

  /** Every current problem, sorted by path. */
  list(): DataProblem[] {
    return [...this.byPath.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }
}
