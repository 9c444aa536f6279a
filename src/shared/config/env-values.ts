/**
 * The values of the `SHARDCRON_*` variables: pure parsers from the raw string to a value or to a
 * message saying what is wrong and what is accepted, for the schema in env-config.ts. Secrets (digest,
 * token, Redis URL) are never echoed into messages: errors get logged.
 */
import { isIPv4, isIPv6 } from 'node:net';

/** One ZooKeeper server of the ensemble; `host` is bare (IPv6 without brackets), ready for `net.connect`. */
export interface ZkServer {
  readonly host: string;
  readonly port: number;
}

/** A parsed value, or the message of a ConfigError issue (the variable name is added by the schema). */
export type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };
const ok = <T>(value: T): Parsed<T> => ({ ok: true, value });
const bad = (message: string): Parsed<never> => ({ ok: false, message });
const VISIBLE_ASCII = /^[\x21-\x7e]+$/;

/** A value as it may appear in a message: JSON-quoted, cut at 100 characters. Never pass it a secret. */
export const quote = (s: string): string => JSON.stringify(s.length > 100 ? `${s.slice(0, 100)}...` : s);

/** A parser of decimal integers from `min` to `max`; `unit` is appended to the range in messages. */
export function integer(min: number, max: number, unit = ''): (raw: string) => Parsed<number> {
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

/** The ZooKeeper ensemble: a comma-separated `host:port` list without chroot, normalised and parsed. */
export function parseZk(raw: string): Parsed<{ connectionString: string; servers: ZkServer[] }> {
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

/** Digest credentials `user:password`. */
/** A comma-separated `host:port` list (Redis Cluster seed nodes, Sentinels), parsed like SHARDCRON_ZK's servers. */
export function parseHostPortList(example: string): (raw: string) => Parsed<ZkServer[]> {
  return (raw) => {
    const servers: ZkServer[] = [];
    const problems: string[] = [];
    raw.split(',').map((s) => s.trim()).forEach((entry, i) => {
      if (entry === '') return void problems.push(`entry ${i + 1} is empty (stray comma?)`);
      const server = parseZkServer(entry);
      if (server.ok) servers.push(server.value);
      else problems.push(server.message);
    });
    if (problems.length > 0) return bad(`${problems.join('; ')}. Expected a comma-separated list of host:port, e.g. ${example}`);
    return ok(servers);
  };
}

/** A PostgreSQL connection URL (`postgres://` or `postgresql://`); its password is never shown. */
export function parsePostgresUrl(raw: string): Parsed<string> {
  const expected = 'expected postgres://[user[:password]@]host[:port]/database';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return bad(`is not a valid URL (value not shown: it may hold a password); ${expected}`);
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') return bad(`scheme ${quote(url.protocol.slice(0, -1))} is not supported; ${expected}`);
  if (url.hostname === '' && !url.searchParams.has('host')) return bad(`has no host; ${expected}`);
  return ok(raw);
}

/** A Sentinel master name: what `SENTINEL get-master-addr-by-name` takes. */
export function parseSentinelName(raw: string): Parsed<string> {
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(raw)) return bad(`${quote(raw)} is not a master name; expected 1-64 characters from A-Z a-z 0-9 . _ -`);
  return ok(raw);
}

export function parseDigest(raw: string): Parsed<{ user: string; password: string }> {
  // Split at the first ':' only: a password may contain ':', a ZooKeeper digest user may not.
  const colon = raw.indexOf(':');
  if (colon <= 0 || colon === raw.length - 1) {
    return bad('expected user:password with a non-empty user and password (value not shown: it is a secret)');
  }
  return ok({ user: raw.slice(0, colon), password: raw.slice(colon + 1) });
}

const NAMESPACE_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/** A namespace: one ZooKeeper node name, also used as the Redis key prefix. */
export function parseNamespace(raw: string): Parsed<string> {
  if (raw === 'zookeeper') return bad('"zookeeper" is reserved: ZooKeeper keeps its own data under /zookeeper; choose another name');
  // The leading [A-Za-z0-9] also rules out "." and "..", which ZooKeeper refuses as node names.
  if (!NAMESPACE_PATTERN.test(raw)) {
    return bad(`${quote(raw)} is not a single ZooKeeper node name; expected 1-128 characters from A-Z a-z 0-9 _ . -, starting with a letter or digit (${NAMESPACE_PATTERN.source})`);
  }
  return ok(raw);
}

/** A `redis://` or `rediss://` URL, returned as given. */
export function parseRedisUrl(raw: string): Parsed<string> {
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

/**
 * A parser of comma-separated lists drawn from `values` (`noun` names one in messages). The result
 * holds each value once, in the order of `values`; an empty list is refused.
 */
export function subsetOf<T extends string>(values: readonly T[], noun: string): (raw: string) => Parsed<T[]> {
  const accepted = `accepted: ${values.join(', ')}`;
  return (raw) => {
    const chosen = new Set<string>();
    const unknown: string[] = [];
    for (const part of raw.split(',').map((s) => s.trim()).filter((s) => s !== '')) {
      if ((values as readonly string[]).includes(part)) chosen.add(part);
      else unknown.push(`${quote(part)}${didYouMean(part, values)}`);
    }
    if (unknown.length > 0) return bad(`unknown ${noun} ${unknown.join(', ')}; ${accepted}`);
    if (chosen.size === 0) return bad(`lists no ${noun}; ${accepted}`);
    return ok(values.filter((v) => chosen.has(v)));
  };
}

/** The path of a jobs module, as given. */
export function parseJobsModule(raw: string): Parsed<string> {
  if (raw.trim() === '' || raw.includes('\0')) return bad('expected the path of a jobs module, e.g. ./dist/jobs.js');
  return ok(raw);
}

/** A file path, as given. */
export function parseFilePath(raw: string): Parsed<string> {
  if (raw.trim() === '' || raw.includes('\0')) return bad('expected a file path');
  return ok(raw);
}

/** An instance id: one ZooKeeper node name of printable ASCII. */
export function parseInstanceId(raw: string): Parsed<string> {
  // It becomes a ZooKeeper node name (instances/{instanceId}) and part of a queue name.
  if (raw.length > 128) return bad(`is ${raw.length} characters long; expected 1-128`);
  if (raw.includes('/')) return bad(`${quote(raw)} contains "/"; an instance id is a single ZooKeeper node name`);
  if (!VISIBLE_ASCII.test(raw)) return bad(`${quote(raw)} contains a space, control or non-ASCII character; expected printable ASCII`);
  if (raw === '.' || raw === '..') return bad(`${quote(raw)} is not a valid ZooKeeper node name`);
  return ok(raw);
}

/** The console's bind address; a bracketed IPv6 address is returned bare. */
export function parseOpsHost(raw: string): Parsed<string> {
  const bracketed = /^\[(.*)\]$/.exec(raw)?.[1];
  if (bracketed !== undefined && isIPv6(bracketed)) return ok(bracketed);
  if (isIPv4(raw) || isIPv6(raw) || isHostname(raw)) return ok(raw);
  return bad(`${quote(raw)} is not an IPv4 address, an IPv6 address or a hostname; e.g. 127.0.0.1, 0.0.0.0, ::, localhost`);
}

/**
 * The shortest console token for a non-loopback address (see {@link shortTokenIssues}); on a loopback
 * one a shorter token is accepted with a warning when the console starts.
 */
export const OPS_TOKEN_ADVISED_LENGTH = 16;

/**
 * The console's bearer token: printable ASCII. Its length is judged with the address it guards
 * ({@link shortTokenIssues}): the contract names none, and a test or a local setup with a short
 * token on loopback is no reason for the console not to serve.
 */
export function parseOpsToken(raw: string): Parsed<string> {
  // It travels in an Authorization header, where spaces and control characters break or get trimmed.
  if (!VISIBLE_ASCII.test(raw)) return bad('contains a space, control or non-ASCII character; expected printable ASCII (value not shown: it is a secret)');
  return ok(raw);
}

/** A parser of exactly one of `values` (`noun` names one in messages). */
export function oneOf<T extends string>(values: readonly T[], noun: string): (raw: string) => Parsed<T> {
  return (raw) => {
    const value = values.find((v) => v === raw);
    return value ? ok(value) : bad(`${quote(raw)} is not a ${noun}${didYouMean(raw, values)}; accepted: ${values.join(', ')}`);
  };
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

/** Optimal string alignment distance, so a swapped pair of letters costs 1, not 2. */
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
export function didYouMean(word: string, candidates: readonly string[]): string {
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

/**
 * Console tokens too short for a console on `host`: under {@link OPS_TOKEN_ADVISED_LENGTH} characters
 * on a non-loopback address, where whoever reaches the port can guess at `POST /login`. One issue per
 * variable, in the shape of the configuration's errors.
 */
export function shortTokenIssues(host: string, tokens: { admin?: string; read?: string }): Array<{ field: string; message: string }> {
  if (isLoopbackHost(host)) return [];
  return shortTokens(tokens).map(({ field, length }) => ({ field, message: `is ${length} characters long; a console on the non-loopback address ${quote(host)} needs at least ${OPS_TOKEN_ADVISED_LENGTH} (openssl rand -hex 32)` }));
}

/** The console tokens set and shorter than {@link OPS_TOKEN_ADVISED_LENGTH}: each one's variable and length. */
export function shortTokens(tokens: { admin?: string; read?: string }): Array<{ field: 'SHARDCRON_OPS_TOKEN' | 'SHARDCRON_OPS_READ_TOKEN'; length: number }> {
  const short: Array<{ field: 'SHARDCRON_OPS_TOKEN' | 'SHARDCRON_OPS_READ_TOKEN'; length: number }> = [];
  for (const [field, token] of [['SHARDCRON_OPS_TOKEN', tokens.admin], ['SHARDCRON_OPS_READ_TOKEN', tokens.read]] as const) {
    if (token !== undefined && token.length < OPS_TOKEN_ADVISED_LENGTH) short.push({ field, length: token.length });
  }
  return short;
}
