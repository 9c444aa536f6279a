/**
 * The console role (DESIGN.md "Console contract"): a fastify server over the admin layer. Routes
 * only validate, authorise and call; the answers' shapes are the contract's (tests outside the repo
 * rely on them). `/healthz` and `/readyz` need no token; everything else does once one is set.
 */
import cookie from '@fastify/cookie';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from '../shared/logger';
import type { ExecutionRecord } from '../shared/registry/execution-record';
import { ConsoleAuth, CSRF_HEADER, SESSION_COOKIE, type Role } from './auth';
import { BULL_BOARD_PATH, BullBoard } from './bull-board';
import { registerDashboard } from './dashboard';
import { HttpError, HttpCodes, sendError } from './http-errors';
import type { ShardcronMetrics } from './metrics';
import { registerJobRoutes, type ConsoleAdmin, type ExecutionsReader, type JobCreator, type LastExecutions } from './routes-jobs';
import { registerClusterRoutes, type Readiness } from './routes-cluster';

export type { ConsoleAdmin } from './routes-jobs';

/** What the console serves, and from what. */
export interface ConsoleOptions {
  admin: ConsoleAdmin;
  host: string;
  port: number;
  tokens: { admin?: string; read?: string };
  log: Logger;
  metrics: ShardcronMetrics;
  readiness(): Promise<Readiness>;
  executions: ExecutionsReader;
  lastExecutions?: LastExecutions;
  createJob?: JobCreator;
  /** Bull Board: a Redis connection for its Queue objects and the live queues to show. */
  bullBoard?: { connection: Redis | Cluster; prefix: string; liveQueues(): Promise<readonly string[]> };
}

/** A running console. */
export interface ConsoleServer {
  /** `http://host:port`, with the port actually bound. */
  readonly url: string;
  readonly app: FastifyInstance;
  close(): Promise<void>;
}

/** Paths that need no token: the probes, the login, and the dashboard's static files (no data). */
const PUBLIC_PATHS = new Set(['/healthz', '/readyz', '/login', '/logout', '/favicon.ico']);
/**
 * A browser opening a page: it cannot send a bearer token on a navigation, so it is given the
 * dashboard's page (which shows the login) and sent there from Bull Board's. Any other client
 * without a token gets the contract's 401, as on every route but the probes.
 */
const opensPage = (request: FastifyRequest): boolean => request.method === 'GET' && (request.headers.accept ?? '').includes('text/html');
const isPublic = (path: string, request: FastifyRequest): boolean => PUBLIC_PATHS.has(path) || path.startsWith('/dashboard/') || (path === '/' && opensPage(request));

/** Builds the console's fastify app (not listening yet). */
export async function buildConsole(options: ConsoleOptions): Promise<{ app: FastifyInstance; board?: BullBoard }> {
  const log = options.log.child({ component: 'console' });
  const auth = new ConsoleAuth(options.tokens);
  // fastify's own request log would carry headers (tokens, cookies): ours logs method, path, status.
  const app = Fastify({ logger: false, bodyLimit: 1 << 20, forceCloseConnections: true });
  await app.register(cookie);
  app.decorateRequest('role', undefined as unknown as Role);
  app.setErrorHandler((err, _request, reply) => sendError(reply, err, log));
  app.setNotFoundHandler((request, reply) => sendError(reply, new HttpError(404, HttpCodes.NOT_FOUND, `no route ${request.method} ${request.url.split('?')[0]}`), log));
  app.addHook('onRequest', async (request, reply) => {
    const path = request.url.split('?')[0];
    if (isPublic(path, request)) return;
    try {
      (request as { role?: Role }).role = auth.authorize(request);
    } catch (err) {
      // Bull Board's page without a session: to the dashboard's login, then back.
      if (err instanceof HttpError && err.status === 401 && opensPage(request) && path.startsWith(BULL_BOARD_PATH) && !path.startsWith(`${BULL_BOARD_PATH}/api`)) {
        return reply.redirect(`/?login=1&next=${encodeURIComponent(path)}`);
      }
      // Answered here, not thrown: Bull Board's routes have their own error handler, which would make it a 500.
      return sendError(reply, err, log);
    }
  });
  app.addHook('onResponse', async (request, reply) => {
    if (reply.statusCode >= 400 || request.method !== 'GET') log.debug({ method: request.method, path: request.url.split('?')[0], status: reply.statusCode }, 'console request');
  });

  app.post('/login', async (request, reply) => {
    const token = typeof (request.body as { token?: unknown } | undefined)?.token === 'string' ? (request.body as { token: string }).token : '';
    if (!auth.enabled) return { role: 'open' };
    const role = auth.roleOfToken(token);
    if (!role) throw new HttpError(401, HttpCodes.UNAUTHORIZED, 'unknown token');
    const secure = request.protocol === 'https';
    reply.setCookie(SESSION_COOKIE, auth.openSession(role), { httpOnly: true, sameSite: 'strict', path: '/', secure, maxAge: 12 * 3600 });
    return { role };
  });
  app.post('/logout', async (request, reply) => {
    auth.closeSession(request.cookies[SESSION_COOKIE]);
    reply.clearCookie(SESSION_COOKIE, { path: '/' });
    return reply.code(204).send();
  });
  app.get('/api/session', async (request) => ({ role: (request as { role?: Role }).role, auth: auth.enabled, csrfHeader: CSRF_HEADER }));

  registerJobRoutes(app, { admin: options.admin, executions: options.executions, lastExecutions: options.lastExecutions, createJob: options.createJob });
  registerClusterRoutes(app, { admin: options.admin, metrics: options.metrics, readiness: options.readiness });
  registerDashboard(app);
  let board: BullBoard | undefined;
  if (options.bullBoard) {
    board = new BullBoard(options.bullBoard.connection, options.bullBoard.liveQueues, log, options.bullBoard.prefix);
    await board.mount(app);
  }
  return { app, board };
}

/** Starts the console on `options.host:options.port` (port 0: any free one). */
export async function startConsole(options: ConsoleOptions): Promise<ConsoleServer> {
  const { app, board } = await buildConsole(options);
  await app.listen({ host: options.host, port: options.port });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : options.port;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  const url = `http://${host}:${port}`;
  options.log.info({ url, auth: options.tokens.admin !== undefined || options.tokens.read !== undefined }, 'console listening');
  let closing: Promise<void> | undefined;
  return {
    url,
    app,
    close: () =>
      (closing ??= (async () => {
        await board?.close();
        await app.close();
      })()),
  };
}

export type { ExecutionRecord };
