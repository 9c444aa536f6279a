/** The options of `shardcron dev` and their parser (pure). */
import { parseArgs } from 'node:util';

/** Default number of worker processes. */
export const DEFAULT_WORKERS = 3;
/** Most worker processes dev starts; each one is a Node process on a small machine. */
export const MAX_WORKERS = 16;

/** Parsed options of `shardcron dev`. */
export interface DevOptions {
  workers: number;
  noInstall: boolean;
  /** `--ha`: a ZooKeeper ensemble of 3 and a Sentinel-managed Redis (primary, replica, 3 Sentinels), all started here. */
  ha: boolean;
  /** Set (to the launch time, epoch ms) in the supervisor process only; internal. */
  launchedAt?: number;
}

/** Parses dev's arguments; returns an error message for bad usage. Pure. */
export function parseDevArgs(args: readonly string[]): DevOptions | { error: string } {
  let values: { workers?: string; 'no-install'?: boolean; ha?: boolean; supervised?: string };
  try {
    ({ values } = parseArgs({
      args: [...args],
      options: { workers: { type: 'string', short: 'w' }, 'no-install': { type: 'boolean' }, ha: { type: 'boolean' }, supervised: { type: 'string' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    return { error: (err as Error).message };
  }
  const workers = values.workers === undefined ? DEFAULT_WORKERS : Number(values.workers);
  if (!/^\d+$/.test(values.workers ?? String(DEFAULT_WORKERS)) || workers < 1 || workers > MAX_WORKERS) {
    return { error: `--workers ${JSON.stringify(values.workers)}: expected an integer from 1 to ${MAX_WORKERS}` };
  }
  const launchedAt = values.supervised === undefined ? undefined : Number(values.supervised);
  return {
    workers,
    noInstall: values['no-install'] === true,
    ha: values.ha === true,
    ...(launchedAt !== undefined && Number.isFinite(launchedAt) && { launchedAt }),
  };
}
