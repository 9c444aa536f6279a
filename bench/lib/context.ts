/** What every scenario receives from bench/run.ts. */
export type BenchMode = 'quick' | 'full';

export interface BenchContext {
  mode: BenchMode;
  /** Progress line on stderr (stdout carries the final table). */
  log(message: string): void;
  /** A namespace / queue name unique to this run. */
  unique(prefix: string): string;
}
