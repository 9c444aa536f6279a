import { z } from 'zod';
import { jsonCodec } from '../codec';

/** `ready` instances receive items; `draining` ones are shutting down and get nothing new. */
export const InstanceStates = ['ready', 'draining'] as const;
export type InstanceState = (typeof InstanceStates)[number];

/** What a worker instance says of itself: where it is, its queue and whether it takes new items. */
export const instanceInfoSchema = z.object({
  ip: z.string().min(1),
  pid: z.number().int().nonnegative(),
  hostname: z.string(),
  queue: z.string().min(1),
  state: z.enum(InstanceStates),
  version: z.string(),
  startedAt: z.number().int().nonnegative(),
});

export type InstanceInfo = z.output<typeof instanceInfoSchema>;

export const instanceInfoCodec = jsonCodec(instanceInfoSchema, 'instance node');

/** Parts a job list may have: 4,096 parts of 256 KB hold far more names than a namespace has jobs. */
export const MAX_JOB_LIST_PARTS = 4096;

/**
 * Data of the ephemeral `/.cluster/instances/{instanceId}`: the instance's info and where the list
 * of the jobs it runs is (`count` names in `parts` nodes `/.cluster/job-lists/{list}.{k}`).
 */
export const instanceEntrySchema = instanceInfoSchema.extend({
  jobs: z.object({
    list: z.string().regex(/^[0-9a-f]{16}-[0-9A-Za-z]{1,32}$/),
    parts: z.number().int().min(0).max(MAX_JOB_LIST_PARTS),
    count: z.number().int().nonnegative(),
  }),
});

export type InstanceEntryData = z.output<typeof instanceEntrySchema>;
export type JobListRef = InstanceEntryData['jobs'];

export const instanceEntryCodec = jsonCodec(instanceEntrySchema, 'instance entry');

/** How many distinct instance nodes {@link decodeInstanceInfo} remembers (workers x their restarts). */
const INTERNED_MAX = 1024;
const interned = new Map<string, InstanceInfo>();

/**
 * Decodes an instance node like {@link instanceInfoCodec}, returning one shared frozen object per
 * distinct node content. Every worker writes the same info under every job it runs, so a leader
 * watching 10,000 jobs keeps one object per worker instead of one per job, and parses each content
 * once. Throws like the codec (CORRUPT_DATA naming `path`).
 */
export function decodeInstanceInfo(data: Buffer, path: string): InstanceInfo {
  const raw = data.toString('utf8');
  const known = interned.get(raw);
  if (known) return known;
  const info = Object.freeze(instanceInfoCodec.decode(data, path));
  // Oldest first out: contents of workers long gone (older startedAt, other states) go first.
  if (interned.size >= INTERNED_MAX) interned.delete(interned.keys().next().value as string);
  interned.set(raw, info);
  return info;
}
