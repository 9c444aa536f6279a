/**
 * A bounded map of values shared by many holders, one per key: when full, the oldest goes first
 * (values of instances long gone, strings no longer used). Used where a leader would otherwise keep
 * an equal copy per job: strings ({@link intern}), eligible instance lists, assignments.
 */
export class SharedValues<T> {
  private readonly values = new Map<string, T>();

  constructor(private readonly max: number) {}

  get(key: string): T | undefined {
    return this.values.get(key);
  }

  /** Keeps `value` under `key` (in place of what was there) and returns it. */
  keep(key: string, value: T): T {
    if (!this.values.has(key) && this.values.size >= this.max) this.values.delete(this.values.keys().next().value as string);
    this.values.set(key, value);
    return value;
  }
}

/**
 * One string object per value for values many objects repeat: a leader keeps a config per job, and
 * 100,000 configs hold a handful of cron expressions, time zones and strategies, as its caches hold
 * the names of a few instances and servers once per job. A string costs 24-40 bytes per copy.
 */
const strings = new SharedValues<string>(4_096);

export function intern(value: string): string {
  return strings.get(value) ?? strings.keep(value, value);
}
