import { z } from 'zod';
import { jsonCodec } from './codec';

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
