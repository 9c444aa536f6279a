/**
 * Item records in Redis: what an item lease's holder writes per run instead of ZooKeeper nodes
 * (SHARDCRON_ITEM_LEASE=on; docs/design-notes.md, "Item leases"). One hash per item,
 * `shardcron:{ns}:item:{job}:{item}`, in the namespace's slot on a Cluster:
 *
 * - `e`: the epoch of the lease that last claimed the item: the `czxid` of its `running` node, which
 *   grows with every node ZooKeeper creates. A claim with an older epoch is refused (a claim that
 *   arrives late, from a holder whose node is gone). A run's start and completion are written only
 *   under the epoch that claimed, so a holder that lost its lease (its session expired while it was
 *   frozen) can never record a completion once another holder has claimed: the new holder either
 *   read that completion in its claim or the write is refused.
 * - `h`: the holder's instance id.
 * - `d`: the item's last {@link COMPLETED_FIRES_KEPT} completed fire times, newest last, comma-separated.
 * - `r`, `c`: the fire of the run in progress, and `1` when that run is catch-up work (written by a
 *   claim, and for a run under a held lease once it has run a while).
 * - `m`: the misfire mark: the latest fire that found the item running.
 * - `a`: `1` once another instance asked for the item (a handoff): the holder lets go after its run.
 *
 * Each step is one Lua script on the item's hash, so a request that finds the item running leaves
 * its mark in the same step that sees the run, and the run's completion reads the mark in the same
 * step that ends the run: no mark can fall between them.
 */
import { Cluster } from 'ioredis';
import type { RedisClient } from '../redis/redis-connection';
import { COMPLETED_FIRES_KEPT } from './completed-fires';
import { namespaceKeyPrefix } from './queue-names';

/** The hash of one item. */
export function itemRecordKey(namespace: string, job: string, item: number): string {
  return `${namespaceKeyPrefix(namespace)}:item:${job}:${item}`;
}

/** Where an instance hears that another one asks for an item it holds. */
export function leaseAskChannel(namespace: string, instanceId: string): string {
  return `${namespaceKeyPrefix(namespace)}:lease-ask:${instanceId}`;
}

/** The message on {@link leaseAskChannel} for an item, and back. */
export const leaseAskMessage = (job: string, item: number): string => `${item}|${job}`;
export function parseLeaseAsk(message: string): { job: string; item: number } | undefined {
  const bar = message.indexOf('|');
  const item = Number(message.slice(0, bar));
  return bar > 0 && Number.isSafeInteger(item) && item >= 0 ? { job: message.slice(bar + 1), item } : undefined;
}

/** The completed fires as the hash keeps them; anything unreadable counts as none. */
export function parseRecordFires(text: string | null | undefined): number[] {
  if (!text) return [];
  const fires: number[] = [];
  for (const part of text.split(',')) {
    const fire = Number(part);
    if (Number.isSafeInteger(fire) && fire > 0) fires.push(fire);
  }
  return fires;
}

/** A mark as the hash keeps it; null when none or unreadable. */
function parseMark(text: string | null | undefined): number | null {
  const fire = Number(text || NaN);
  return Number.isSafeInteger(fire) && fire > 0 ? fire : null;
}

/** `d` with ARGV fire added, newest last, at most COMPLETED_FIRES_KEPT entries. */
const WITH_FIRE = `
local function withFire(d, fire)
  if not d or d == '' then return fire end
  if not string.find(',' .. d .. ',', ',' .. fire .. ',', 1, true) then
    d = d .. ',' .. fire
  else
    local out = {}
    for f in string.gmatch(d, '[^,]+') do if f ~= fire then out[#out + 1] = f end end
    out[#out + 1] = fire
    d = table.concat(out, ',')
  end
  local _, commas = string.gsub(d, ',', ',')
  while commas >= ${COMPLETED_FIRES_KEPT} do
    d = string.sub(d, string.find(d, ',', 1, true) + 1)
    commas = commas - 1
  end
  return d
end
`;

/** Lua: whether epoch a (a zxid as fixed-width hex or decimal) is older than b. */
const OLDER = `
local function older(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
`;

/**
 * ARGV: epoch, holder, fire, catchUp. Claims the item for a new lease and shows its first run.
 * Returns {1, d, m}, or {0} when a newer lease claimed it already (nothing written).
 */
const CLAIM = `${OLDER}
local e = redis.call('HGET', KEYS[1], 'e')
if e and e ~= '' and older(ARGV[1], e) then return {0} end
redis.call('HSET', KEYS[1], 'e', ARGV[1], 'h', ARGV[2], 'r', ARGV[3], 'c', ARGV[4])
redis.call('HDEL', KEYS[1], 'a')
local v = redis.call('HMGET', KEYS[1], 'd', 'm')
return {1, v[1] or '', v[2] or ''}
`;

/**
 * Shows runs under held leases, one per key; ARGV: epoch, fire, catchUp per key. Per key: 1, or 0
 * when another lease claimed the item since (nothing written).
 */
const BEGIN = `
local out = {}
for i, key in ipairs(KEYS) do
  local a = (i - 1) * 3
  if redis.call('HGET', key, 'e') ~= ARGV[a + 1] then
    out[i] = 0
  else
    redis.call('HSET', key, 'r', ARGV[a + 2], 'c', ARGV[a + 3])
    out[i] = 1
  end
end
return out
`;

/**
 * Ends runs, one per key; ARGV per key: epoch, fire, completed (1/0), the mark fire the run stood
 * for (or ''). Records the fire when completed, consumes the mark if it still says that fire, and
 * clears `r` (runs under one lease come one after another, so whatever `r` says is this lease's).
 * Per key three values: 1, the mark left, '1' when asked; or 0, '', '' when another lease claimed
 * since (nothing written).
 */
const END = `${WITH_FIRE}
local out = {}
for i, key in ipairs(KEYS) do
  local a = (i - 1) * 4
  local v = redis.call('HMGET', key, 'e', 'd', 'm', 'a')
  if v[1] ~= ARGV[a + 1] then
    out[#out + 1] = 0; out[#out + 1] = ''; out[#out + 1] = ''
  else
    if ARGV[a + 3] == '1' then redis.call('HSET', key, 'd', withFire(v[2], ARGV[a + 2])) end
    local mark = v[3] or ''
    if ARGV[a + 4] ~= '' and mark == ARGV[a + 4] then
      redis.call('HDEL', key, 'm', 'r', 'c')
      mark = ''
    else
      redis.call('HDEL', key, 'r', 'c')
    end
    out[#out + 1] = 1; out[#out + 1] = mark; out[#out + 1] = v[4] or ''
  end
end
return out
`;

/**
 * ARGV: fire, mark (1/0), waitBehindCatchUp (1/0), the holder's epoch (its node's czxid), channel,
 * message. Another instance found the item's lease held. Either way the holder is asked for the
 * item (it lets go once its run, and the re-run of any mark, ended). If the record shows a run of
 * that lease: marks it (when asked to, and unless the run is catch-up work the request waits for)
 * and returns {1, catchUp}. If not (no run, or `r` left by an earlier lease): returns {0, 0}.
 */
const CONTEND = `
local v = redis.call('HMGET', KEYS[1], 'r', 'c', 'm', 'e')
redis.call('HSET', KEYS[1], 'a', '1')
redis.call('PUBLISH', ARGV[5], ARGV[6])
if v[1] and v[1] ~= '' and v[4] == ARGV[4] then
  local catchUp = v[2] == '1'
  if catchUp and ARGV[3] == '1' then return {1, 1} end
  if ARGV[2] == '1' and (not v[3] or v[3] == '' or tonumber(v[3]) < tonumber(ARGV[1])) then
    redis.call('HSET', KEYS[1], 'm', ARGV[1])
  end
  return {1, catchUp and 1 or 0}
end
return {0, 0}
`;

/** ARGV: fire. Leaves the mark (never moves it back): a run of the marking process holds the item. */
const MARK = `
local m = redis.call('HGET', KEYS[1], 'm')
if not m or m == '' or tonumber(m) < tonumber(ARGV[1]) then redis.call('HSET', KEYS[1], 'm', ARGV[1]) end
return 1
`;

interface ItemRecordCommands {
  shardcronItemClaim(key: string, epoch: string, holder: string, fire: string, catchUp: string): Promise<[number, string?, string?]>;
  shardcronItemBegin(keyCount: number, ...keysThenArgs: string[]): Promise<number[]>;
  shardcronItemEnd(keyCount: number, ...keysThenArgs: string[]): Promise<Array<number | string>>;
  shardcronItemMark(key: string, fire: string): Promise<number>;
  shardcronItemContend(key: string, fire: string, mark: string, waitBehindCatchUp: string, epoch: string, channel: string, message: string): Promise<[number, number]>;
}

/** What ending a run found. */
export type RunEnd = { ok: false } | { ok: true; mark: number | null; asked: boolean };

/** What a request that found the lease held elsewhere learned. */
export type Contention = { running: true; catchUp: boolean } | { running: false };

/** Keys in one script call at most. */
const KEYS_PER_CALL = 256;

/**
 * Calls of one script issued within one event-loop turn, sent as one call over all their keys (a
 * namespace's keys share a slot on a Cluster). The script does each key's step on its own, so a
 * key's outcome is what it would have been alone; a failed call fails each of its keys.
 */
class ScriptBatch<T> {
  private queued: Array<{ key: string; args: readonly string[]; resolve(value: T): void; reject(err: unknown): void }> = [];

  constructor(
    private readonly answersPerKey: number,
    private readonly call: (keyCount: number, keysThenArgs: string[]) => Promise<Array<number | string>>,
    private readonly answer: (out: Array<number | string>, index: number) => T,
  ) {}

  add(key: string, args: readonly string[]): Promise<T> {
    return new Promise((resolve, reject) => {
      if (this.queued.length === 0) setImmediate(() => this.flush());
      this.queued.push({ key, args, resolve, reject });
    });
  }

  private flush(): void {
    const all = this.queued;
    this.queued = [];
    for (let from = 0; from < all.length; from += KEYS_PER_CALL) {
      const batch = all.slice(from, from + KEYS_PER_CALL);
      const keysThenArgs: string[] = batch.map((q) => q.key);
      for (const q of batch) keysThenArgs.push(...q.args);
      this.call(batch.length, keysThenArgs).then(
        (out) => {
          if (out.length !== batch.length * this.answersPerKey) {
            const err = new Error(`item record script answered ${out.length} values for ${batch.length} keys`);
            for (const q of batch) q.reject(err);
            return;
          }
          batch.forEach((q, i) => q.resolve(this.answer(out, i)));
        },
        (err: unknown) => {
          for (const q of batch) q.reject(err);
        },
      );
    }
  }
}

/** The item records of one namespace, on one connection (its scripts defined once). */
export class ItemRecords {
  private readonly commands: ItemRecordCommands;
  /** The starts and ends of runs issued within one event-loop turn go out as one script call. */
  private readonly begins = new ScriptBatch<boolean>(1, (n, args) => this.commands.shardcronItemBegin(n, ...args), (out, i) => out[i] === 1);
  private readonly ends = new ScriptBatch<RunEnd>(3, (n, args) => this.commands.shardcronItemEnd(n, ...args), (out, i) =>
    out[i * 3] === 1 ? { ok: true, mark: parseMark(out[i * 3 + 1] as string), asked: out[i * 3 + 2] === '1' } : { ok: false },
  );

  constructor(
    private readonly redis: RedisClient,
    private readonly namespace: string,
  ) {
    redis.defineCommand('shardcronItemClaim', { numberOfKeys: 1, lua: CLAIM });
    // Key counts vary: the first argument says how many.
    redis.defineCommand('shardcronItemBegin', { lua: BEGIN });
    redis.defineCommand('shardcronItemEnd', { lua: END });
    redis.defineCommand('shardcronItemContend', { numberOfKeys: 1, lua: CONTEND });
    redis.defineCommand('shardcronItemMark', { numberOfKeys: 1, lua: MARK });
    this.commands = redis as unknown as ItemRecordCommands;
  }

  key(job: string, item: number): string {
    return itemRecordKey(this.namespace, job, item);
  }

  /**
   * Claims the item for a new lease (`epoch`: its node's czxid) and shows its first run, of `fire`:
   * the completed fires and the mark left; null when a newer lease claimed it already.
   */
  async claim(job: string, item: number, epoch: string, holder: string, fire: number, catchUp: boolean): Promise<{ done: number[]; mark: number | null } | null> {
    const [ok, done, mark] = await this.commands.shardcronItemClaim(this.key(job, item), epoch, holder, String(fire), catchUp ? '1' : '0');
    return ok === 1 ? { done: parseRecordFires(done), mark: parseMark(mark) } : null;
  }

  /** Shows a run under a held lease in the record; false when another lease claimed the item since. */
  begin(job: string, item: number, epoch: string, fire: number, catchUp: boolean): Promise<boolean> {
    return this.begins.add(this.key(job, item), [epoch, String(fire), catchUp ? '1' : '0']);
  }

  /** Ends a run: records `fire` when completed, consumes `markFire` if still the mark. */
  end(job: string, item: number, epoch: string, fire: number, completed: boolean, markFire: number | undefined): Promise<RunEnd> {
    return this.ends.add(this.key(job, item), [epoch, String(fire), completed ? '1' : '0', markFire === undefined ? '' : String(markFire)]);
  }

  /** Records `fire` as the latest that found the item running (a run of ours holds it). */
  async mark(job: string, item: number, fire: number): Promise<void> {
    await this.commands.shardcronItemMark(this.key(job, item), String(fire));
  }

  /** The item's misfire mark, if any. */
  async markOf(job: string, item: number): Promise<number | null> {
    return parseMark(await this.redis.hget(this.key(job, item), 'm'));
  }

  /** Whether another instance asked for the item since its last claim. */
  async asked(job: string, item: number): Promise<boolean> {
    return (await this.redis.hget(this.key(job, item), 'a')) === '1';
  }

  /**
   * Another instance holds the lease (`holder`, whose node has czxid `holderEpoch`): ask it for the
   * item, and mark its run if the record shows one (see CONTEND).
   */
  async contend(job: string, item: number, fire: number, mark: boolean, waitBehindCatchUp: boolean, holder: string, holderEpoch: string): Promise<Contention> {
    const [running, catchUp] = await this.commands.shardcronItemContend(
      this.key(job, item),
      String(fire),
      mark ? '1' : '0',
      waitBehindCatchUp ? '1' : '0',
      holderEpoch,
      leaseAskChannel(this.namespace, holder),
      leaseAskMessage(job, item),
    );
    return running === 1 ? { running: true, catchUp: catchUp === 1 } : { running: false };
  }
}

/** What a reader (the leader's reshard, the console) needs of an item's record. */
export interface ItemRun {
  holder: string | undefined;
  /** The fire of the run in progress, if any. */
  running: number | undefined;
}

/** The records of `items` of `job`, one pipelined HMGET each. */
export async function readItemRuns(redis: RedisClient, namespace: string, job: string, items: readonly number[]): Promise<Map<number, ItemRun>> {
  const out = new Map<number, ItemRun>();
  const answers = await Promise.all(items.map((item) => redis.hmget(itemRecordKey(namespace, job, item), 'h', 'r')));
  items.forEach((item, i) => {
    const [holder, running] = answers[i]!;
    const fire = parseMark(running);
    out.set(item, { holder: holder || undefined, running: fire ?? undefined });
  });
  return out;
}

/**
 * Deletes every item record of `job` (its removal): found by SCAN, on every primary of a Cluster.
 * Job names have no `:` or `*`, so the pattern matches this job's records only. Returns how many.
 */
export async function deleteItemRecords(redis: RedisClient, namespace: string, job: string): Promise<number> {
  const pattern = `${itemRecordKey(namespace, job, 0).slice(0, -1)}*`;
  let deleted = 0;
  const nodes = redis instanceof Cluster ? redis.nodes('master') : [redis];
  for (const node of nodes) {
    for await (const keys of node.scanStream({ match: pattern, count: 500 }) as AsyncIterable<string[]>) {
      if (keys.length > 0) deleted += await node.del(...keys);
    }
  }
  return deleted;
}
