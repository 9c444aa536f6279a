/** BullMQ key prefix of every shardcron queue; namespaces are kept apart by the queue name. */
export const QUEUE_PREFIX = 'shardcron';

/**
 * The queue of one instance incarnation. A new incarnation (after a lost session) gets a new
 * queue, so requests meant for the old one can never be taken by the new one by mistake.
 * BullMQ forbids ':' in queue names; IPv6 instance ids have them.
 */
export function instanceQueueName(namespace: string, instanceId: string, incarnation: string): string {
  return `${namespace}.${instanceId}.${incarnation}`.replace(/:/g, '_');
}
