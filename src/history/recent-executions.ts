/**
 * The recent list: each job's last N ExecutionRecords in one Redis list (newest first), which the
 * console answers `GET /api/jobs/:name/executions` from. Written in batches off the execution path.
 */
import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { z } from 'zod';
import { silentLogger, type Logger } from '../shared/logger';
import type { ExecutionRecord } from '../shared/registry/execution-record';
import { recentExecutionsKey } from '../shared/registry/redis-keys';
import { parseOrThrow } from '../shared/validation';
import { BatchWriter, type SendOutcome } from './batch-writer';
import type { ExecutionHistoryWriter } from './history-events';
import { batchingSchema } from './batching-options';
import { encodeRecentEntry } from './recent-entry';

/** Records kept per job unless configured otherwise. */
export const DEFAULT_RECENT_PER_JOB = 1_000;

const optionsSchema = z.object({
  namespace: z.string().min(1).regex(/^[^{}]+$/, 'must not contain { or } (it goes inside a Redis Cluster hash tag)'),
  /** Records kept per job: older ones are trimmed at every write. */
  keepPerJob: z.number().int().min(1).max(1_000_000).default(DEFAULT_RECENT_PER_JOB),
  /**
   * Expiry of a job's list, renewed at every write: the list of a job nobody runs any more goes
   * away. Must be longer than the job's longest gap between executions. Absent: lists never expire.
   */
  ttlMs: z.number().int().min(1_000).optional(),
  /**
   * Short-lived batches: at thousands of records a second a record waiting 200 ms for its flush
   * outlived the young generation and cost the garbage collector more than its write; 20 ms and 100
   * records halved the list's cost in the throughput bench (docs/history.md).
   */
  batching: batchingSchema({ maxBuffered: 10_000, batchSize: 100, flushIntervalMs: 20, retryMaxMs: 2_000, closeTimeoutMs: 2_000 }),
});

/** Options of {@link RecentExecutionsWriter} (defaults in the schema above). */
export type RecentExecutionsWriterOptions = z.input<typeof optionsSchema> & {
  /**
   * A connection the caller owns (not closed here); commands are only sent while it is `ready`. The
   * writer defines its script's command on it (needs EVAL and EVALSHA: the `@scripting` ACL category).
   */
  redis: Redis | Cluster;
  logger?: Logger;
};

/** One buffered record: its list and its JSON, made at append time so the buffer holds plain strings. */
interface Entry {
  key: string;
  json: string;
}

/** Errors Redis will answer again however often the write is retried. */
const PERMANENT_REDIS_ERRORS = /^(WRONGTYPE|ERR)/;

/** Values pushed by one LPUSH at most in {@link WRITE_LISTS} (Lua's unpack has a bounded stack). */
const PUSH_SLICE = 1_000;
/**
 * Records per script call at most (a job with more goes alone in its call): a script holds Redis,
 * BullMQ's commands included, for its whole run, where a pipeline let other clients in between.
 */
const CALL_RECORDS = 1_000;

/**
 * One flush's lists in one script: per key (KEYS[i]), ARGV holds its record count then the records,
 * after ARGV[1] = records kept and ARGV[2] = the expiry in ms (0: none). Each key's LPUSH, LTRIM and
 * PEXPIRE run on their own (pcall), so a key Redis refuses costs only its own records. Returns per
 * key '' (written), the push's error (not written), or '~' and the trim's or expiry's error
 * (written, not trimmed). Every key of a namespace shares its hash slot, so a Cluster takes it too.
 */
const WRITE_LISTS = `
local keep = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local at = 3
local out = {}
for i = 1, #KEYS do
  local n = tonumber(ARGV[at])
  local first, last = at + 1, at + n
  at = last + 1
  local failed
  for s = first, last, ${PUSH_SLICE} do
    local pushed = redis.pcall('LPUSH', KEYS[i], unpack(ARGV, s, math.min(s + ${PUSH_SLICE - 1}, last)))
    if type(pushed) == 'table' and pushed.err then failed = pushed.err break end
  end
  if failed then
    out[i] = failed
  else
    local trimmed = redis.pcall('LTRIM', KEYS[i], 0, keep - 1)
    local expired = ttl > 0 and redis.pcall('PEXPIRE', KEYS[i], ttl) or 1
    local err = (type(trimmed) == 'table' and trimmed.err) or (type(expired) == 'table' and expired.err)
    out[i] = err and ('~' .. err) or ''
  end
end
return out`;

/**
 * The script's command name on the caller's connection, with its digest: another version of the
 * writer sharing the connection defines its own script, not a second use of this one's name.
 */
const WRITE_COMMAND = `shardcronRecentWrite_${createHash('sha1').update(WRITE_LISTS).digest('hex').slice(0, 12)}`;

/** The connection with {@link WRITE_LISTS} defined on it as {@link WRITE_COMMAND}. */
type ScriptedRedis = (Redis | Cluster) & Record<typeof WRITE_COMMAND, (numberOfKeys: number, args: Array<string | number>) => Promise<unknown>>;

/**
 * Appends ExecutionRecords to each job's recent list. `append()` returns at once; records are
 * written every `flushIntervalMs` (or as soon as a batch is full) in one script call: LPUSH, LTRIM
 * to `keepPerJob` (and PEXPIRE with `ttlMs`) per job touched. While Redis is unreachable records wait
 * in a bounded buffer (oldest dropped first, counted, logged and emitted as `history:dropped`).
 */
export class RecentExecutionsWriter extends BatchWriter<Entry> implements ExecutionHistoryWriter {
  private readonly redis: ScriptedRedis;
  private readonly namespace: string;
  private readonly keepPerJob: number;
  private readonly ttlMs: number | undefined;

  constructor(options: RecentExecutionsWriterOptions) {
    const { redis, logger, ...rest } = options;
    const parsed = parseOrThrow(optionsSchema, rest, 'recent executions writer options');
    super('redis', parsed.batching, (logger ?? silentLogger).child({ component: 'recent-executions', ns: parsed.namespace }));
    if (!(WRITE_COMMAND in redis)) redis.defineCommand(WRITE_COMMAND, { lua: WRITE_LISTS });
    this.redis = redis as ScriptedRedis;
    this.namespace = parsed.namespace;
    this.keepPerJob = parsed.keepPerJob;
    this.ttlMs = parsed.ttlMs;
  }

  /**
   * Queues `record` for its job's list; never throws, never waits. The record is trusted to be valid
   * (the worker builds it from a validated request; a zod parse here cost a copy of every record on a
   * hot path) and is stored in its compact form (recent-entry.ts); the reader validates what it reads.
   * A job name that cannot make a key is dropped and reported.
   */
  append(record: ExecutionRecord): void {
    let key: string;
    try {
      key = recentExecutionsKey(this.namespace, record.job);
    } catch (err) {
      return this.dropInvalid(err, record);
    }
    this.enqueue({ key, json: encodeRecentEntry(record) });
  }

  protected override isReady(): boolean {
    return this.redis.status === 'ready';
  }

  protected override async send(batch: readonly Entry[]): Promise<SendOutcome<Entry>> {
    const byKey = new Map<string, string[]>();
    for (const { key, json } of batch) {
      const list = byKey.get(key);
      if (list) list.push(json);
      else byKey.set(key, [json]);
    }
    // One script call per flush (per CALL_RECORDS records), where a pipeline of two or three
    // commands per job cost the worker a command each (20,000 one-item jobs firing at once: 40,000).
    const lists = [...byKey];
    const replies: unknown[] = [];
    for (let from = 0; from < lists.length; ) {
      let to = from;
      let records = 0;
      while (to < lists.length && (to === from || records + lists[to][1].length <= CALL_RECORDS)) records += lists[to++][1].length;
      const call = lists.slice(from, to);
      const args: Array<string | number> = call.map(([key]) => key);
      args.push(this.keepPerJob, this.ttlMs ?? 0);
      for (const [, jsons] of call) {
        args.push(jsons.length);
        for (const json of jsons) args.push(json);
      }
      let answer: unknown;
      try {
        answer = await this.redis[WRITE_COMMAND](call.length, args);
        if (!Array.isArray(answer) || answer.length !== call.length) throw new Error(`unexpected answer of the recent list script: ${JSON.stringify(answer)?.slice(0, 200)}`);
      } catch (err) {
        // The first call failing is the whole flush failing (retried by the writer); after a call
        // that went through, only the lists not written yet go again, so none is written twice.
        if (from === 0) throw err;
        this.logger.warn({ err }, 'writing part of a flush to the recent lists failed; the rest is retried');
        break;
      }
      replies.push(...(answer as unknown[]));
      from = to;
    }
    const retry: Entry[] = [];
    let rejected = 0;
    lists.forEach(([key, jsons], i) => {
      if (i >= replies.length) {
        for (const json of jsons) retry.push({ key, json });
        return;
      }
      const reply = String(replies[i]);
      if (reply === '') return;
      if (reply.startsWith('~')) {
        // The records are in; the list may hold more than keepPerJob until the next write trims it.
        this.logger.warn({ err: new Error(reply.slice(1)), key }, 'trimming or expiring a recent list failed');
      } else if (PERMANENT_REDIS_ERRORS.test(reply)) {
        rejected += jsons.length;
        this.logger.error({ err: new Error(reply), key }, `Redis refused the recent list ${key}; its records are dropped`);
      } else {
        for (const json of jsons) retry.push({ key, json });
      }
    });
    return { retry, rejected };
  }
}
