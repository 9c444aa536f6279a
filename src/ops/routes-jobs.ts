/**
 * The console's job routes (DESIGN.md "Console contract"): list, detail, executions, create,
 * config updates, trigger, disable/enable of a job and of an item, removal. Each route validates its
 * input (400 naming every bad field), calls the admin layer and answers what the contract says.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { ExecutionRecord } from '../shared/registry/execution-record';
import { JOB_NAME_PATTERN } from '../shared/registry/registry-paths';
import { HttpCodes, HttpError, parseInput } from './http-errors';

/** What the routes need of the admin layer (src/admin's Admin). */
export interface ConsoleAdmin {
  listJobs(): Promise<ReadonlyArray<{ name: string }>>;
  getJob(job: string): Promise<{ name: string }>;
  listInstances(): Promise<ReadonlyArray<{ instanceId: string; queue: string }>>;
  trigger(job: string, options?: { requestedBy?: string }): Promise<{ requestId: string }>;
  disableJob(job: string): Promise<unknown>;
  enableJob(job: string): Promise<unknown>;
  disableItem(job: string, item: number): Promise<unknown>;
  enableItem(job: string, item: number): Promise<unknown>;
  disableServer(ip: string): Promise<unknown>;
  enableServer(ip: string): Promise<unknown>;
  updateConfig(job: string, update: unknown): Promise<unknown>;
  removeJob(job: string): Promise<unknown>;
}

/** The recent executions of a job, newest first. */
export type ExecutionsReader = (job: string, options: { limit: number; item?: number }) => Promise<ExecutionRecord[]>;
/** What the job list shows of a job's newest execution. */
export type LastExecution = Pick<ExecutionRecord, 'status' | 'finishedAt' | 'item' | 'error'>;
/** The newest execution of each of `jobs`, as known (kept fresh off the request path: never waits for Redis). */
export type LastExecutions = (jobs: readonly string[]) => ReadonlyMap<string, LastExecution>;
/** Stores a job defined by the API (SCRIPT or HTTP); 409 when the name exists. */
export type JobCreator = (body: unknown, requestedBy: string) => Promise<{ name: string; config: unknown }>;

const jobParams = z.object({
  name: z.string().regex(JOB_NAME_PATTERN, { message: 'is not a job name: 1-128 characters from A-Z a-z 0-9 _ -, starting with a letter or digit' }),
});
// Any item number the admin layer takes (up to nine digits; a job has at most 1,000 items): one past
// the job's total is 404 (no such item), as the contract has for an unknown item.
const itemParams = jobParams.extend({
  item: z.string().regex(/^\d{1,9}$/, { message: 'is not a sharding item: a non-negative integer' }).transform(Number),
});
const executionsQuery = z
  .object({
    limit: z.string().regex(/^\d+$/, { message: 'is not a positive integer' }).transform(Number).pipe(z.number().min(1, { message: 'must be at least 1' }).max(1_000, { message: 'must be at most 1000' })).optional(),
    item: z.string().regex(/^\d{1,9}$/, { message: 'is not a sharding item: a non-negative integer' }).transform(Number).optional(),
  })
  .strict();
const objectBody = z.record(z.string(), z.unknown(), { error: 'must be a JSON object' });

/** Who asked, for the audit trail of trigger requests. */
const requester = (request: FastifyRequest): string => `console:${(request as { role?: string }).role ?? 'open'}`;

export function registerJobRoutes(app: FastifyInstance, deps: { admin: ConsoleAdmin; executions: ExecutionsReader; lastExecutions?: LastExecutions; createJob?: JobCreator }): void {
  const { admin } = deps;
  const name = (request: FastifyRequest) => parseInput(jobParams, request.params, 'path').name;

  app.get('/api/jobs', async () => {
    const jobs = await admin.listJobs();
    const last = deps.lastExecutions?.(jobs.map((job) => job.name));
    return { jobs: jobs.map((job) => ({ ...job, lastExecution: last?.get(job.name) ?? null })) };
  });

  app.post('/api/jobs', async (request, reply) => {
    if (!deps.createJob) throw new HttpError(404, HttpCodes.NOT_FOUND, 'this console cannot create jobs');
    const created = await deps.createJob(parseInput(objectBody, request.body, 'body'), requester(request));
    return reply.code(201).send(created);
  });

  app.get('/api/jobs/:name', async (request) => admin.getJob(name(request)));

  app.get('/api/jobs/:name/executions', async (request) => {
    const job = name(request);
    const query = parseInput(executionsQuery, request.query, 'query');
    await admin.getJob(job); // 404 for an unknown job
    return { executions: await deps.executions(job, { limit: query.limit ?? 50, ...(query.item !== undefined && { item: query.item }) }) };
  });

  app.put('/api/jobs/:name/config', async (request) => ({ config: await admin.updateConfig(name(request), parseInput(objectBody, request.body, 'body')) }));

  app.post('/api/jobs/:name/trigger', async (request, reply) => reply.code(202).send(await admin.trigger(name(request), { requestedBy: requester(request) })));

  app.post('/api/jobs/:name/disable', async (request) => {
    await admin.disableJob(name(request));
    return admin.getJob(name(request));
  });

  app.post('/api/jobs/:name/enable', async (request) => {
    await admin.enableJob(name(request));
    return admin.getJob(name(request));
  });

  app.post('/api/jobs/:name/sharding/:item/disable', async (request) => {
    const { name: job, item } = parseInput(itemParams, request.params, 'path');
    return admin.disableItem(job, item);
  });

  app.post('/api/jobs/:name/sharding/:item/enable', async (request) => {
    const { name: job, item } = parseInput(itemParams, request.params, 'path');
    return admin.enableItem(job, item);
  });

  app.delete('/api/jobs/:name', async (request, reply) => {
    await admin.removeJob(name(request));
    return reply.code(204).send();
  });
}
