import pino, { type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

/**
 * Root logger. Components derive children scoped with `{component, ns, job, item, instanceId}`.
 * Level comes from the caller (env config) so library code never reads process.env itself.
 */
export function createLogger(options: { level?: LevelWithSilent; name?: string } = {}): Logger {
  return pino({ name: options.name ?? 'shardcron', level: options.level ?? 'info' });
}

/** A logger that drops everything; the default for library objects created without one. */
export const silentLogger: Logger = pino({ level: 'silent' });
