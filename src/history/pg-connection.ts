import { Pool } from 'pg';
import { ConfigError, ErrorCodes } from '../shared/errors';
import type { Logger } from '../shared/logger';

/**
 * Where the traces are: a `postgres://` URL (a pool is made and ended here) or a pool the caller
 * owns. A caller's pool needs its own 'error' listener, as node-postgres says: an idle client whose
 * server restarts emits one.
 */
export type PgConnection = { connectionString: string; pool?: undefined } | { pool: Pool; connectionString?: undefined };

const URL_PATTERN = /^postgres(ql)?:\/\/\S+$/;

/**
 * The pool behind `connection`: the caller's, or a new small one for a URL. Throws a ConfigError
 * naming `connectionString` unless exactly one of the two is given and the URL looks like one.
 */
export function poolFor(connection: { pool?: Pool; connectionString?: unknown }, subject: string, logger: Logger): Pool {
  const { pool, connectionString } = connection;
  const bad = (message: string) => new ConfigError(ErrorCodes.INVALID_CONFIG, `Invalid ${subject}`, [{ field: 'connectionString', message }]);
  if (pool !== undefined) {
    if (connectionString !== undefined) throw bad('give a connection string or a pool, not both');
    return pool;
  }
  if (typeof connectionString !== 'string') throw bad('missing: give a postgres:// URL (SHARDCRON_TRACING_PG_URL) or a pool');
  if (!URL_PATTERN.test(connectionString)) throw bad('must be a postgres:// or postgresql:// URL, e.g. postgres://user:password@host:5432/db');
  const owned = new Pool({
    connectionString,
    // One batch at a time is written; a second connection serves reads and a reconnect's overlap.
    max: 2,
    connectionTimeoutMillis: 5_000,
    // Bounds a flush (and so close()) when the server stops answering without closing the socket.
    query_timeout: 15_000,
    idleTimeoutMillis: 10_000,
    allowExitOnIdle: true,
    application_name: 'shardcron',
  });
  // Without a listener, an idle client that loses its server (a restart) is an uncaught 'error'.
  owned.on('error', (err) => logger.debug({ err }, 'an idle PostgreSQL connection failed'));
  return owned;
}
