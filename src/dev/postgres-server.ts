import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { ErrorCodes, ShardcronError } from '../shared/errors';
import { silentLogger, type Logger } from '../shared/logger';
import { ChildService, findExecutable, makeTempDir } from './child-service';
import { getFreePort, LOOPBACK } from './free-port';
import { LocalServer } from './local-server';

/** The two programs a throwaway cluster needs. */
export interface PostgresInstallation {
  initdb: string;
  postgres: string;
}

/** Debian installs each major version's server programs here, off PATH. */
const DEBIAN_ROOT = '/usr/lib/postgresql';

function debianBinDirs(): string[] {
  let versions: string[];
  try {
    versions = fs.readdirSync(DEBIAN_ROOT).filter((v) => /^\d+$/.test(v));
  } catch {
    return [];
  }
  return versions.sort((a, b) => Number(b) - Number(a)).map((v) => path.join(DEBIAN_ROOT, v, 'bin'));
}

/**
 * Finds initdb and postgres: in `SHARDCRON_PG_BIN_DIR` if set, else the newest
 * `/usr/lib/postgresql/<version>/bin`, else on PATH. Throws a MISSING_DEPENDENCY ShardcronError
 * naming what is missing and how to install it.
 */
export function findPostgres(env: NodeJS.ProcessEnv = process.env): PostgresInstallation {
  const dirs = env.SHARDCRON_PG_BIN_DIR ? [env.SHARDCRON_PG_BIN_DIR] : debianBinDirs();
  const lookIn = (name: string) => dirs.map((dir) => findExecutable(path.join(dir, name), env)).find(Boolean);
  const initdb = lookIn('initdb') ?? (env.SHARDCRON_PG_BIN_DIR ? undefined : findExecutable('initdb', env));
  const postgres = lookIn('postgres') ?? (env.SHARDCRON_PG_BIN_DIR ? undefined : findExecutable('postgres', env));
  if (initdb && postgres) return { initdb, postgres };
  const where = env.SHARDCRON_PG_BIN_DIR ? `SHARDCRON_PG_BIN_DIR=${env.SHARDCRON_PG_BIN_DIR}` : `${DEBIAN_ROOT}/*/bin or PATH`;
  const missing = [initdb ? undefined : 'initdb', postgres ? undefined : 'postgres'].filter(Boolean).join(' and ');
  throw new ShardcronError(
    ErrorCodes.MISSING_DEPENDENCY,
    `Cannot start a local PostgreSQL: no ${missing} executable in ${where}. Install it with ` +
      '`apt-get update && apt-get install -y postgresql` (Debian), or set SHARDCRON_PG_BIN_DIR to the directory holding initdb and postgres.',
    { missing },
  );
}

/** uid and gid of `user` from /etc/passwd, or undefined if there is no such user. */
function lookUpUser(user: string): { uid: number; gid: number } | undefined {
  const line = fs.readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith(`${user}:`));
  const [, , uid, gid] = line?.split(':') ?? [];
  return uid === undefined || gid === undefined ? undefined : { uid: Number(uid), gid: Number(gid) };
}

/**
 * The argv prefix that runs a PostgreSQL program: as is, or, when this process is root (PostgreSQL
 * refuses to run as root), as `user` through setpriv. setpriv sets the parent-death signal again
 * after changing user, since the kernel clears it on a change of credentials: the server must not
 * outlive this process.
 */
function runAs(user: string, dataOwner: (uid: number, gid: number) => void): string[] {
  if (process.getuid?.() !== 0) return [];
  const ids = lookUpUser(user);
  const setpriv = findExecutable('setpriv');
  if (!ids || !setpriv) {
    throw new ShardcronError(
      ErrorCodes.MISSING_DEPENDENCY,
      `Cannot start a local PostgreSQL as root: PostgreSQL refuses to run as root, and ${ids ? 'setpriv (util-linux) is missing' : `there is no user ${JSON.stringify(user)} to run it as`}. ` +
        'Install Debian\'s `postgresql` package (it creates the postgres user) and util-linux, or run as another user.',
      { user },
    );
  }
  dataOwner(ids.uid, ids.gid);
  return [setpriv, `--reuid=${ids.uid}`, `--regid=${ids.gid}`, '--clear-groups', '--pdeathsig', 'KILL', '--'];
}

/** Settings of a throwaway cluster: durability off (its data is thrown away anyway), loopback only. */
const THROWAWAY_SETTINGS: Record<string, string> = {
  fsync: 'off',
  synchronous_commit: 'off',
  full_page_writes: 'off',
  listen_addresses: LOOPBACK,
  max_connections: '50',
  shared_buffers: '32MB',
};

/** Options of {@link PostgresServer.start}. */
export interface PostgresServerOptions {
  /** Port; 0 or absent picks a free one. */
  port?: number;
  /** More `-c name=value` settings, e.g. `{ shared_preload_libraries: 'pg_stat_statements' }`. */
  settings?: Record<string, string>;
  /** The OS user the server runs as when this process is root; default `postgres`. */
  user?: string;
  logger?: Logger;
  /** How long initdb plus the first start may take; default 30000. */
  startTimeoutMs?: number;
  /** Environment read by {@link findPostgres}; default `process.env`. */
  env?: NodeJS.ProcessEnv;
}

/** True once the server accepts a connection and answers a query (not "the database system is starting up"). */
async function answersQuery(port: number): Promise<boolean> {
  const client = new Client({ host: LOOPBACK, port, user: 'postgres', database: 'postgres', connectionTimeoutMillis: 1_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * A throwaway PostgreSQL cluster on 127.0.0.1 (initdb in a temp dir, trust authentication, user
 * and database `postgres`), for tests and `shardcron dev`. Data survives {@link stop} and
 * {@link restart}; {@link close} removes it. Stopping is PostgreSQL's fast shutdown (SIGINT): the
 * default SIGTERM would wait for every client to disconnect.
 */
export class PostgresServer extends LocalServer {
  private constructor(
    port: number,
    child: ChildService,
    removeTemp: () => void,
    /** The cluster's data directory (in a temp dir that close() removes). */
    readonly dataDir: string,
  ) {
    super(port, child, removeTemp);
  }

  /** Creates a cluster in a temp dir, starts it and resolves once it answers a query. */
  static async start(options: PostgresServerOptions = {}): Promise<PostgresServer> {
    const programs = findPostgres(options.env);
    const port = options.port || (await getFreePort());
    const temp = makeTempDir('shardcron-postgres-');
    const logger = (options.logger ?? silentLogger).child({ component: 'postgres-server', port });
    const startTimeoutMs = options.startTimeoutMs ?? 30_000;
    const dataDir = path.join(temp.root, 'data');
    try {
      const prefix = runAs(options.user ?? 'postgres', (uid, gid) => fs.chownSync(temp.root, uid, gid));
      const argv = (program: string, args: string[]) => {
        const [command = program, ...rest] = [...prefix, program, ...args];
        return { command, args: rest };
      };
      const initdb = argv(programs.initdb, ['-D', dataDir, '-U', 'postgres', '-A', 'trust', '--no-locale', '-E', 'UTF8', '--no-sync']);
      await promisify(execFile)(initdb.command, initdb.args, { timeout: startTimeoutMs }).catch((err: { stderr?: string; message: string }) => {
        throw new ShardcronError(ErrorCodes.SERVICE_START_FAILED, `initdb failed: ${err.stderr?.trim() || err.message}`, { dataDir }, { cause: err });
      });
      const settings = { ...THROWAWAY_SETTINGS, unix_socket_directories: temp.root, ...options.settings };
      const server = argv(programs.postgres, ['-D', dataDir, '-p', String(port), ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])]);
      const child = new ChildService({
        name: 'postgres', command: server.command, args: server.args, port, logger, cwd: temp.root,
        isReady: () => answersQuery(port),
        startTimeoutMs,
        stopGraceMs: 5_000,
      });
      return await new PostgresServer(port, child, temp.remove, dataDir).boot();
    } catch (err) {
      temp.remove();
      throw err;
    }
  }

  /** `postgres://postgres@127.0.0.1:PORT/postgres`, for node-postgres. */
  get url(): string {
    return `postgres://postgres@${LOOPBACK}:${this.port}/postgres`;
  }

  /** Fast shutdown (SIGINT): open connections are closed, not waited for. Keeps the port and the data. */
  override stop(): Promise<void> {
    this.fastShutdown();
    return super.stop();
  }

  /** Fast shutdown, then starts again on the same port with the same data. */
  override restart(): Promise<void> {
    this.fastShutdown();
    return super.restart();
  }

  /** Fast shutdown and removal of the data; idempotent. */
  override close(): Promise<void> {
    this.fastShutdown();
    return super.close();
  }

  private fastShutdown(): void {
    // The base class then sends SIGTERM, which a server already shutting down fast ignores.
    const pid = this.child.pid;
    if (pid === undefined) return;
    try { process.kill(pid, 'SIGINT'); } catch { /* it exited meanwhile */ }
  }
}
