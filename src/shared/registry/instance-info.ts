import { z } from 'zod';
import { jsonCodec } from '../codec';

/** `ready` instances receive items; `draining` ones are shutting down and get nothing new. */
export const InstanceStates = ['ready', 'draining'] as const;
export type InstanceState = (typeof InstanceStates)[number];

/** Data of the ephemeral node `/{job}/instances/{instanceId}`. */
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
