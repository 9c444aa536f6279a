/**
 * The console's cluster routes: servers by IP, instances, health, readiness and Prometheus metrics
 * (DESIGN.md "Console contract").
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { parseInput } from './http-errors';
import type { ShardcronMetrics } from './metrics';
import type { ConsoleAdmin } from './routes-jobs';

/** What `/readyz` reports: each dependency `ok` or `down`, and the leader's instance id (`none` while there is none). */
export interface Readiness {
  zookeeper: 'ok' | 'down';
  redis: 'ok' | 'down';
  leader: string;
}

const serverParams = z.object({ ip: z.string().min(1, { message: 'is empty' }).max(200).regex(/^[^/\s]+$/, { message: 'is not an IP address (no "/" or spaces)' }) });

export function registerClusterRoutes(app: FastifyInstance, deps: { admin: ConsoleAdmin; metrics: ShardcronMetrics; readiness(): Promise<Readiness> }): void {
  app.post('/api/servers/:ip/disable', async (request) => deps.admin.disableServer(parseInput(serverParams, request.params, 'path').ip));
  app.post('/api/servers/:ip/enable', async (request) => deps.admin.enableServer(parseInput(serverParams, request.params, 'path').ip));
  app.get('/api/instances', async () => ({ instances: await deps.admin.listInstances() }));
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    const ready = await deps.readiness();
    return reply.code(ready.zookeeper === 'ok' && ready.redis === 'ok' ? 200 : 503).send(ready);
  });
  app.get('/metrics', async (_request, reply) => reply.type(deps.metrics.contentType).send(await deps.metrics.text()));
}
