/**
 * The environment: every `SHARDCRON_*` variable, its default, its validation and its documentation,
 * in one place. {@link loadEnvConfig} is the only reader of `process.env` in the code base; everything
 * else receives the typed, frozen {@link ShardcronEnvConfig} it returns.
 */
import { isIPv4, isIPv6 } from 'node:net';
import { z } from 'zod';
import { ConfigError, ErrorCodes, type FieldIssue } from './errors';
import { toFieldIssues } from './validation';

/** Roles a process can take (DESIGN.md "Processes and roles"), in their canonical order. */
export const ROLES = Object.freeze(['scheduler', 'worker', 'console'] as const);
/** One process role. */
export type Role = (typeof ROLES)[number];

/** pino levels accepted by SHARDCRON_LOG_LEVEL. */
export const LOG_LEVELS = Object.freeze(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const);
/** One log level. */
export type LogLevel = (typeof LOG_LEVELS)[number];

/** One ZooKeeper server of the ensemble; `host` is bare (IPv6 without brackets), ready for `net.connect`. */
export interface ZkServer {
  readonly host: string;
  readonly port: number;
}

/** The validated environment. Deeply frozen; optional fields are absent (not `undefined`) when unset. */
export interface ShardcronEnvConfig {
  readonly zk: {
    /** Normalised `host:port,host:port` (IPv6 hosts bracketed), without chroot. */
    readonly connectionString: string;
    /** The same list, parsed. */
    readonly servers: readonly ZkServer[];
    readonly sessionTimeoutMs: number;
    readonly connectTimeoutMs: number;
    /** Retry back-off of failed ZooKeeper operations (ElasticJob's registry-center settings). */
    readonly baseSleepMs: number;
    readonly maxSleepMs: number;
    readonly maxRetries: number;
    /** Digest credentials; a secret, never log it. */
    readonly digest?: { readonly user: string; readonly password: string };
  };
  /** ZooKeeper chroot (`/{namespace}`) and Redis key prefix. */
  readonly namespace: string;
  /** Redis URL; may carry a password, never log it unredacted. */
  readonly redisUrl: string;
  /** Distinct roles, in canonical order. */
  readonly roles: readonly Role[];
  /** Path of a jobs module, as given. */
  readonly jobsModule?: string;
  /** Executions run at once per worker instance. */
  readonly concurrency: number;
  /** Overrides the default `{ip}@-@{pid}`. */
  readonly instanceId?: string;
  readonly ops: { readonly host: string; readonly port: number; readonly token?: string };
  readonly logLevel: LogLevel;
  readonly shutdownGraceMs: number;
  /** Overrides for the local ZooKeeper and Redis that `shardcron dev` and the tests start. */
  readonly localServices: { readonly java?: string; readonly zkClasspath?: string; readonly redisServer?: string };
}

/** One documented environment variable. `default` is undefined for variables that are unset by default. */
export interface EnvVariable {
  readonly name: `SHARDCRON_${string}`;
  readonly default: string | undefined;
  readonly description: string;
}

function variable<N extends `SHARDCRON_${string}`>(name: N, def: string | undefined, description: string) {
  return Object.freeze({ name, default: def, description });
}

/**
 * Every variable shardcron reads, in documentation order: the single source of the defaults applied by
 * {@link loadEnvConfig}, of {@link describeEnv} (docs/configuration.md) and of `shardcron env`.
 */
export const ENV_VARIABLES = Object.freeze([
  variable('SHARDCRON_ZK', '127.0.0.1:2181',
    'ZooKeeper ensemble: comma-separated `host:port` list; hosts are IPv4 addresses, hostnames or `[IPv6]`, ports 1-65535. No `/chroot` suffix: the namespace is the chroot.'),
  variable('SHARDCRON_ZK_SESSION_TIMEOUT_MS', '10000',
    'ZooKeeper session timeout, 1000-600000 ms (the server clamps it to 2-20 times its tickTime). A worker that loses its connection aborts its executions before this deadline.'),
  variable('SHARDCRON_ZK_CONNECT_TIMEOUT_MS', '15000',
    'How long to wait for a ZooKeeper connection, 100-600000 ms.'),
  variable('SHARDCRON_ZK_BASE_SLEEP_MS', '1000',
    'First retry delay of a failed ZooKeeper operation, 1-60000 ms; doubles on each retry (ElasticJob `baseSleepTimeMilliseconds`).'),
  variable('SHARDCRON_ZK_MAX_SLEEP_MS', '3000',
    'Longest retry delay, 1-600000 ms, at least SHARDCRON_ZK_BASE_SLEEP_MS (ElasticJob `maxSleepTimeMilliseconds`).'),
  variable('SHARDCRON_ZK_MAX_RETRIES', '3',
    'Retries of a failed ZooKeeper operation, 0-29 (Curator\'s limit; ElasticJob `maxRetries`).'),
  variable('SHARDCRON_ZK_DIGEST', undefined,
    'ZooKeeper digest authentication `user:password`, both non-empty (ElasticJob `digest`). Unset: no authentication.'),
  variable('SHARDCRON_NAMESPACE', 'shardcron',
    'Scheduling domain: ZooKeeper root `/{namespace}`, Redis key prefix, one leader. 1-128 characters from `A-Z a-z 0-9 _ . -`, starting with a letter or digit; not `zookeeper`.'),
  variable('SHARDCRON_REDIS_URL', 'redis://127.0.0.1:6379',
    'Redis of the BullMQ queues: `redis://[user:password@]host[:port][/db]`, or `rediss://` for TLS.'),
  variable('SHARDCRON_ROLES', 'scheduler,worker,console',
    'Comma-separated roles of this process: `scheduler` (leader candidate), `worker` (runs items), `console` (ops HTTP server). At least one.'),
  variable('SHARDCRON_JOBS', undefined,
    'Path of a jobs module (default export: an array of `defineJob(...)`). Unset: jobs come only from code (`startNode({ jobs })`).'),
  variable('SHARDCRON_CONCURRENCY', '10',
    'Executions one worker instance runs at once, 1-1000.'),
  variable('SHARDCRON_INSTANCE_ID', undefined,
    'Overrides the instance id `{ip}@-@{pid}`: 1-128 printable ASCII characters, no spaces, no `/`. Must be unique among the live processes of the namespace.'),
  variable('SHARDCRON_OPS_HOST', '127.0.0.1',
    'Address the console binds: IPv4, IPv6 or hostname. A non-loopback address requires SHARDCRON_OPS_TOKEN.'),
  variable('SHARDCRON_OPS_PORT', '8080',
    'Port of the console, 0-65535 (0: any free port).'),
  variable('SHARDCRON_OPS_TOKEN', undefined,
    'Bearer token of the console, at least 16 printable ASCII characters without spaces (e.g. `openssl rand -hex 32`). Required when the console binds a non-loopback address.'),
  variable('SHARDCRON_LOG_LEVEL', 'info',
    'Log level: `fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`.'),
  variable('SHARDCRON_SHUTDOWN_GRACE_MS', '30000',
    'On SIGTERM, how long running executions may take to finish before they are aborted, 0-3600000 ms.'),
  variable('SHARDCRON_JAVA', undefined,
    'Local services only (`shardcron dev`, tests): the java executable that runs ZooKeeper. Unset: `$JAVA_HOME/bin/java`, else `java` on PATH.'),
  variable('SHARDCRON_ZK_CLASSPATH', undefined,
    'Local services only: a classpath holding ZooKeeper\'s jars (e.g. `/opt/zookeeper/lib/*`). Unset: Debian\'s `zookeeper` package.'),
  variable('SHARDCRON_REDIS_SERVER', undefined,
    'Local services only: the redis-server executable. Unset: `redis-server` on PATH.'),
] satisfies EnvVariable[]);

/** Name of a known variable. */
export type EnvVariableName = (typeof ENV_VARIABLES)[number]['name'];

const KNOWN_NAMES: ReadonlySet<string> = new Set(ENV_VARIABLES.map((v) => v.name));
const PREFIX = 'SHARDCRON_';

// ---------------------------------------------------------------------------------------------------
// Value parsers: pure functions from the raw string to a value or to a message saying what is wrong
// and what is accepted. Secrets (digest, token, Redis URL) are never echoed into messages: errors get logged.

type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };
const ok = <T>(value: T): Parsed<T> => ({ ok: true, value });
const bad = (message: string): Parsed<never> => ({ ok: false, message });
const quote = (s: string): string => JSON.stringify(s.length > 100 ? `${s.slice(0, 100)}...` : s);
const VISIBLE_ASCII = /^[\x21-\x7e]+$/;

function integer(min: number, max: number, unit = ''): (raw: string) => Parsed<number> {
  const expected = `expected an integer from ${min} to ${max}${unit}`;
  return (raw) => {
    if (/^\d+$/.test(raw)) {
      const n = Number(raw);
      return n >= min && n <= max ? ok(n) : bad(`${raw} is out of range; ${expected}`);
    }
    // Number() would accept "1e3", " 12 " and "0x10"; an env value is a decimal integer or a mistake.
    let why = 'is not a decimal integer';
    if (/^-\s*\d/.test(raw)) why = 'is negative';
    else if (/^\+?\d*\.\d*$/.test(raw) && raw !== '.') why = 'is not a whole number';
    else if (/^\+?[\d.]+e[+-]?\d+$/i.test(raw)) why = 'uses exponent notation (write the digits out)';
    return bad(`${quote(raw)} ${why}; ${expected}`);
  };
}

const HOST_LABEL = /^[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$/;

/** RFC 1123 hostnames, plus '_' because Docker Compose service names (valid DNS names there) use it. */
function isHostname(host: string): boolean {
  // A dotted all-digit name is a mistyped IPv4 address ("10.0.0.256"), not a hostname.
  if (host.length > 253 || /^[\d.]+$/.test(host)) return false;
  return host.split('.').every((label) => HOST_LABEL.test(label));
}

function parseZkServer(entry: string): Parsed<ZkServer> {
  let host: string;
  let port: string;
  if (entry.startsWith('[')) {
    const close = entry.indexOf(']');
    host = close < 0 ? '' : entry.slice(1, close);
    if (close < 0 || !isIPv6(host)) return bad(`${quote(entry)} does not start with a bracketed IPv6 address`);
    if (entry[close + 1] !== ':') return bad(`${quote(entry)} has no port`);
    port = entry.slice(close + 2);
  } else {
    const parts = entry.split(':');
    if (parts.length === 1) return bad(`${quote(entry)} has no port`);
    if (parts.length > 2) return bad(`${quote(entry)}: write an IPv6 address in brackets, e.g. [::1]:2181`);
    [host, port] = parts as [string, string];
    if (!isIPv4(host) && !isHostname(host)) return bad(`${quote(host)} is not an IPv4 address or a hostname`);
  }
  const n = Number(port);
  if (!/^\d+$/.test(port) || n < 1 || n > 65535) return bad(`${quote(entry)} has port ${quote(port)}; ports are 1-65535`);
  return ok({ host, port: n });
}

function parseZk(raw: string): Parsed<{ connectionString: string; servers: ZkServer[] }> {
  const slash = raw.indexOf('/');
  if (slash >= 0) {
    return bad(`remove the chroot suffix ${quote(raw.slice(slash))}: shardcron chroots its ZooKeeper client to /{SHARDCRON_NAMESPACE}, so set SHARDCRON_NAMESPACE instead`);
  }
  const entries = raw.split(',').map((s) => s.trim());
  const servers: ZkServer[] = [];
  const problems: string[] = [];
  entries.forEach((entry, i) => {
    if (entry === '') return void problems.push(`entry ${i + 1} is empty (stray comma?)`);
    const server = parseZkServer(entry);
    if (server.ok) servers.push(server.value);
    else problems.push(server.message);
  });
  if (problems.length > 0) {
    return bad(`${problems.join('; ')}. Expected a comma-separated list of host:port, e.g. zk1:2181,zk2:2181,[::1]:2181`);
  }
  return ok({ connectionString: entries.join(','), servers });
}

function parseDigest(raw: string): Parsed<{ user: string; password: string }> {
  // Split at the first ':' only: a password may contain ':', a ZooKeeper digest user may not.
  const colon = raw.indexOf(':');
  if (colon <= 0 || colon === raw.length - 1) {
    return bad('expected user:password with a non-empty user and password (value not shown: it is a secret)');
  }
  return ok({ user: raw.slice(0, colon), password: raw.slice(colon + 1) });
}

const NAMESPACE_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

function parseNamespace(raw: string): Parsed<string> {
  if (raw === 'zookeeper') return bad('"zookeeper" is reserved: ZooKeeper keeps its own data under /zookeeper; choose another name');
  // The leading [A-Za-z0-9] also rules out "." and "..", which ZooKeeper refuses as node names.
  if (!NAMESPACE_PATTERN.test(raw)) {
    return bad(`${quote(raw)} is not a single ZooKeeper node name; expected 1-128 characters from A-Z a-z 0-9 _ . -, starting with a letter or digit (${NAMESPACE_PATTERN.source})`);
  }
  return ok(raw);
}

function parseRedisUrl(raw: string): Parsed<string> {
  const expected = 'expected redis://[user:password@]host[:port][/db] or rediss://... for TLS';
  if (!/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(raw)) return bad(`has no scheme; ${expected}`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return bad(`is not a valid URL (value not shown: it may hold a password); ${expected}`);
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') return bad(`scheme ${quote(url.protocol.slice(0, -1))} is not supported; ${expected}`);
  if (url.hostname === '') return bad(`has no host; ${expected}`);
  if (!/^(\/\d*)?$/.test(url.pathname)) return bad(`database ${quote(url.pathname.slice(1))} is not a number; ${expected}`);
  return ok(raw);
}

function parseRoles(raw: string): Parsed<Role[]> {
  const accepted = `accepted: ${ROLES.join(', ')}`;
  const chosen = new Set<string>();
  const unknown: string[] = [];
  for (const part of raw.split(',').map((s) => s.trim()).filter((s) => s !== '')) {
    if ((ROLES as readonly string[]).includes(part)) chosen.add(part);
    else unknown.push(`${quote(part)}${didYouMean(part, ROLES)}`);
  }
  if (unknown.length > 0) return bad(`unknown role ${unknown.join(', ')}; ${accepted}`);
  if (chosen.size === 0) return bad(`lists no role; ${accepted}`);
  return ok(ROLES.filter((r) => chosen.has(r)));
}

function parseJobsModule(raw: string): Parsed<string> {
  if (raw.trim() === '' || raw.includes('\0')) return bad('expected the path of a jobs module, e.g. ./dist/jobs.js');
  return ok(raw);
}

function parseFilePath(raw: string): Parsed<string> {
  if (raw.trim() === '' || raw.includes('\0')) return bad('expected a file path');
  return ok(raw);
}

function parseInstanceId(raw: string): Parsed<string> {
  // It becomes a ZooKeeper node name (instances/{instanceId}) and part of a queue name.
  if (raw.length > 128) return bad(`is ${raw.length} characters long; expected 1-128`);
  if (raw.includes('/')) return bad(`${quote(raw)} contains "/"; an instance id is a single ZooKeeper node name`);
  if (!VISIBLE_ASCII.test(raw)) return bad(`${quote(raw)} contains a space, control or non-ASCII character; expected printable ASCII`);
  if (raw === '.' || raw === '..') return bad(`${quote(raw)} is not a valid ZooKeeper node name`);
  return ok(raw);
}

function parseOpsHost(raw: string): Parsed<string> {
  const bracketed = /^\[(.*)\]$/.exec(raw)?.[1];
  if (bracketed !== undefined && isIPv6(bracketed)) return ok(bracketed);
  if (isIPv4(raw) || isIPv6(raw) || isHostname(raw)) return ok(raw);
  return bad(`${quote(raw)} is not an IPv4 address, an IPv6 address or a hostname; e.g. 127.0.0.1, 0.0.0.0, ::, localhost`);
}

function parseOpsToken(raw: string): Parsed<string> {
  if (raw.length < 16) return bad(`is ${raw.length} characters long; expected at least 16 (e.g. openssl rand -hex 32)`);
  // It travels in an Authorization header, where spaces and control characters break or get trimmed.
  if (!VISIBLE_ASCII.test(raw)) return bad('contains a space, control or non-ASCII character; expected printable ASCII (value not shown: it is a secret)');
  return ok(raw);
}

function parseLogLevel(raw: string): Parsed<LogLevel> {
  const level = LOG_LEVELS.find((l) => l === raw);
  return level ? ok(level) : bad(`${quote(raw)} is not a log level${didYouMean(raw, LOG_LEVELS)}; accepted: ${LOG_LEVELS.join(', ')}`);
}

/**
 * True for addresses that only this machine can reach: 127.0.0.0/8, ::1 (any spelling, also
 * IPv4-mapped ::ffff:127.x.y.z) and `localhost`. The console refuses other binds without a token.
 */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  if (h === 'localhost') return true;
  if (isIPv4(h)) return h.startsWith('127.');
  if (!isIPv6(h)) return false;
  // The WHATWG URL parser canonicalises IPv6 ("0:0:0:0:0:0:0:1" -> "[::1]", "::ffff:127.0.0.1" -> "[::ffff:7f00:1]").
  const canonical = new URL(`http://[${h}]`).hostname;
  return canonical === '[::1]' || /^\[::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}\]$/.test(canonical);
}

// ---------------------------------------------------------------------------------------------------
// "Did you mean": optimal string alignment distance, so a swapped pair of letters costs 1, not 2.

function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, d[i - 2]![j - 2]! + 1);
      d[i]![j] = best;
    }
  }
  return d[a.length]![b.length]!;
}

/**
 * `" (did you mean X?)"` for the candidates the word is a prefix of (a dropped suffix, as in
 * SHARDCRON_REDIS), else for the closest one within a third of the word's length; `""` otherwise.
 */
function didYouMean(word: string, candidates: readonly string[]): string {
  const upper = word.toUpperCase();
  const extensions = candidates.filter((c) => c.toUpperCase().startsWith(upper));
  if (extensions.length === 1) return ` (did you mean ${extensions[0]}?)`;
  if (extensions.length > 1) return ` (did you mean ${extensions.slice(0, -1).join(', ')} or ${extensions[extensions.length - 1]}?)`;
  let best: { name: string; distance: number } | undefined;
  for (const name of candidates) {
    const distance = editDistance(upper, name.toUpperCase());
    if (!best || distance < best.distance) best = { name, distance };
  }
  return best && best.distance <= Math.max(2, Math.floor(word.length / 3)) ? ` (did you mean ${best.name}?)` : '';
}

// ---------------------------------------------------------------------------------------------------
// The schema. Field issues carry the variable name as their path, so ConfigError names it.

function fromString<T>(parse: (raw: string) => Parsed<T>) {
  return z.string().transform((raw, ctx): T => {
    const result = parse(raw);
    if (result.ok) return result.value;
    ctx.addIssue({ code: 'custom', message: result.message });
    return z.NEVER;
  });
}

function withDefault<T>(name: EnvVariableName, parse: (raw: string) => Parsed<T>) {
  const fallback = ENV_VARIABLES.find((v) => v.name === name)?.default;
  if (fallback === undefined) throw new Error(`${name} has no default in ENV_VARIABLES`);
  // The default goes through the same parser as a user's value, so a bad default cannot hide.
  return z.preprocess((value) => value ?? fallback, fromString(parse));
}

const optional = <T>(parse: (raw: string) => Parsed<T>) => fromString(parse).optional();

const shape = {
  SHARDCRON_ZK: withDefault('SHARDCRON_ZK', parseZk),
  SHARDCRON_ZK_SESSION_TIMEOUT_MS: withDefault('SHARDCRON_ZK_SESSION_TIMEOUT_MS', integer(1000, 600_000, ' (milliseconds)')),
  SHARDCRON_ZK_CONNECT_TIMEOUT_MS: withDefault('SHARDCRON_ZK_CONNECT_TIMEOUT_MS', integer(100, 600_000, ' (milliseconds)')),
  SHARDCRON_ZK_BASE_SLEEP_MS: withDefault('SHARDCRON_ZK_BASE_SLEEP_MS', integer(1, 60_000, ' (milliseconds)')),
  SHARDCRON_ZK_MAX_SLEEP_MS: withDefault('SHARDCRON_ZK_MAX_SLEEP_MS', integer(1, 600_000, ' (milliseconds)')),
  // Curator's ExponentialBackoffRetry caps retries at 29 (the delay doubles and would overflow an int).
  SHARDCRON_ZK_MAX_RETRIES: withDefault('SHARDCRON_ZK_MAX_RETRIES', integer(0, 29)),
  SHARDCRON_ZK_DIGEST: optional(parseDigest),
  SHARDCRON_NAMESPACE: withDefault('SHARDCRON_NAMESPACE', parseNamespace),
  SHARDCRON_REDIS_URL: withDefault('SHARDCRON_REDIS_URL', parseRedisUrl),
  SHARDCRON_ROLES: withDefault('SHARDCRON_ROLES', parseRoles),
  SHARDCRON_JOBS: optional(parseJobsModule),
  SHARDCRON_CONCURRENCY: withDefault('SHARDCRON_CONCURRENCY', integer(1, 1000)),
  SHARDCRON_INSTANCE_ID: optional(parseInstanceId),
  SHARDCRON_OPS_HOST: withDefault('SHARDCRON_OPS_HOST', parseOpsHost),
  SHARDCRON_OPS_PORT: withDefault('SHARDCRON_OPS_PORT', integer(0, 65535)),
  SHARDCRON_OPS_TOKEN: optional(parseOpsToken),
  SHARDCRON_LOG_LEVEL: withDefault('SHARDCRON_LOG_LEVEL', parseLogLevel),
  SHARDCRON_SHUTDOWN_GRACE_MS: withDefault('SHARDCRON_SHUTDOWN_GRACE_MS', integer(0, 3_600_000, ' (milliseconds)')),
  // Read by src/dev (local services), not by the node; listed so they are documented and not "unknown".
  SHARDCRON_JAVA: optional(parseFilePath),
  SHARDCRON_ZK_CLASSPATH: optional(parseFilePath),
  SHARDCRON_REDIS_SERVER: optional(parseFilePath),
} satisfies Record<EnvVariableName, z.ZodType>;

/** Keeps the SHARDCRON_* entries (any case, to catch `shardcron_zk`) and drops empty ones: `VAR=` means unset. */
function selectVariables(env: unknown): unknown {
  if (typeof env !== 'object' || env === null) return env;
  const selected: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(env)) {
    if (key.toUpperCase().startsWith(PREFIX) && value !== undefined && value !== '') selected[key] = value;
  }
  return selected;
}

/** A cross-field rule runs only when the fields it reads are valid, so it never reports a follow-on error. */
function whenValid(...names: EnvVariableName[]) {
  return { when: (payload: z.core.ParsePayload) => !payload.issues.some((i) => names.includes(i.path?.[0] as EnvVariableName)) };
}

/**
 * The zod schema of the environment: input is an env record (like `process.env`), output is
 * {@link ShardcronEnvConfig} (not yet frozen; {@link loadEnvConfig} freezes it).
 */
export const envSchema = z.preprocess(
  selectVariables,
  z
    .looseObject(shape)
    // Unknown variables run regardless of other failures: a typo is often the cause of those.
    .superRefine((env, ctx) => {
      for (const name of Object.keys(env).filter((k) => !KNOWN_NAMES.has(k)).sort()) {
        const known = [...KNOWN_NAMES].find((k) => k === name.toUpperCase());
        const hint = known ? ` (names are case-sensitive: did you mean ${known}?)` : didYouMean(name, [...KNOWN_NAMES]);
        ctx.addIssue({ code: 'custom', path: [name], message: `unknown variable${hint}; see docs/configuration.md for the list` });
      }
    }, { when: () => true })
    .superRefine((env, ctx) => {
      if (env.SHARDCRON_ZK_MAX_SLEEP_MS < env.SHARDCRON_ZK_BASE_SLEEP_MS) {
        ctx.addIssue({
          code: 'custom',
          path: ['SHARDCRON_ZK_MAX_SLEEP_MS'],
          message: `${env.SHARDCRON_ZK_MAX_SLEEP_MS} is below SHARDCRON_ZK_BASE_SLEEP_MS (${env.SHARDCRON_ZK_BASE_SLEEP_MS}); the longest retry delay must be at least the first one`,
        });
      }
    }, whenValid('SHARDCRON_ZK_BASE_SLEEP_MS', 'SHARDCRON_ZK_MAX_SLEEP_MS'))
    .superRefine((env, ctx) => {
      // DESIGN.md: the console refuses a non-loopback bind without a token. Failing here, at start,
      // beats a process that comes up and then has no console.
      const host = env.SHARDCRON_OPS_HOST;
      if (env.SHARDCRON_ROLES.includes('console') && !isLoopbackHost(host) && env.SHARDCRON_OPS_TOKEN === undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['SHARDCRON_OPS_TOKEN'],
          message: `is required: the console role binds the non-loopback address ${quote(host)} (SHARDCRON_OPS_HOST); set a token of at least 16 characters, or bind 127.0.0.1`,
        });
      }
    }, whenValid('SHARDCRON_ROLES', 'SHARDCRON_OPS_HOST', 'SHARDCRON_OPS_TOKEN')),
).transform((env): ShardcronEnvConfig => {
  const digest = env.SHARDCRON_ZK_DIGEST;
  const token = env.SHARDCRON_OPS_TOKEN;
  return {
    zk: {
      connectionString: env.SHARDCRON_ZK.connectionString,
      servers: env.SHARDCRON_ZK.servers,
      sessionTimeoutMs: env.SHARDCRON_ZK_SESSION_TIMEOUT_MS,
      connectTimeoutMs: env.SHARDCRON_ZK_CONNECT_TIMEOUT_MS,
      baseSleepMs: env.SHARDCRON_ZK_BASE_SLEEP_MS,
      maxSleepMs: env.SHARDCRON_ZK_MAX_SLEEP_MS,
      maxRetries: env.SHARDCRON_ZK_MAX_RETRIES,
      ...(digest !== undefined && { digest }),
    },
    namespace: env.SHARDCRON_NAMESPACE,
    redisUrl: env.SHARDCRON_REDIS_URL,
    roles: env.SHARDCRON_ROLES,
    ...(env.SHARDCRON_JOBS !== undefined && { jobsModule: env.SHARDCRON_JOBS }),
    concurrency: env.SHARDCRON_CONCURRENCY,
    ...(env.SHARDCRON_INSTANCE_ID !== undefined && { instanceId: env.SHARDCRON_INSTANCE_ID }),
    ops: { host: env.SHARDCRON_OPS_HOST, port: env.SHARDCRON_OPS_PORT, ...(token !== undefined && { token }) },
    logLevel: env.SHARDCRON_LOG_LEVEL,
    shutdownGraceMs: env.SHARDCRON_SHUTDOWN_GRACE_MS,
    localServices: {
      ...(env.SHARDCRON_JAVA !== undefined && { java: env.SHARDCRON_JAVA }),
      ...(env.SHARDCRON_ZK_CLASSPATH !== undefined && { zkClasspath: env.SHARDCRON_ZK_CLASSPATH }),
      ...(env.SHARDCRON_REDIS_SERVER !== undefined && { redisServer: env.SHARDCRON_REDIS_SERVER }),
    },
  };
});

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

function variableOrder(field: string): number {
  const index = ENV_VARIABLES.findIndex((v) => v.name === field);
  return index < 0 ? ENV_VARIABLES.length : index;
}

/**
 * Reads and validates every SHARDCRON_* variable of `env`. Returns the deeply frozen config, or throws
 * one {@link ConfigError} (code SHARDCRON_INVALID_CONFIG) whose `issues` name every invalid or unknown
 * variable (`field` = variable name). Empty values count as unset.
 */
export function loadEnvConfig(env: Record<string, string | undefined> = process.env): ShardcronEnvConfig {
  const result = envSchema.safeParse(env);
  if (!result.success) {
    // Documentation order reads better than zod's (cross-field rules last); sort is stable.
    const issues: FieldIssue[] = toFieldIssues(result.error).sort((a, b) => variableOrder(a.field) - variableOrder(b.field));
    throw new ConfigError(ErrorCodes.INVALID_CONFIG, 'Invalid shardcron environment (see docs/configuration.md)', issues);
  }
  return deepFreeze(result.data);
}

/** The markdown table of {@link ENV_VARIABLES} (Variable | Default | Description), as in docs/configuration.md. */
export function describeEnv(): string {
  const cell = (s: string) => s.replace(/\|/g, '\\|');
  const rows = ENV_VARIABLES.map(
    (v) => `| \`${v.name}\` | ${v.default === undefined ? '(unset)' : `\`${cell(v.default)}\``} | ${cell(v.description)} |`,
  );
  return ['| Variable | Default | Description |', '| --- | --- | --- |', ...rows].join('\n');
}
